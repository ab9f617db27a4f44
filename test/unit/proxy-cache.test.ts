import { describe, expect, it } from 'vitest';
import {
  cacheHeaders,
  isFresh,
  ResponseCache,
  staleIfErrorSec,
  usableWhenStale,
} from '../../src/sim/response-cache.js';

const entry = { status: 200, body: '{}', storedAtMs: 1_000_000, ttlSec: 5 };

describe('stale-if-error directive', () => {
  it('reads the number of seconds, wherever the directive stands', () => {
    expect(staleIfErrorSec('stale-if-error=300')).toBe(300);
    expect(staleIfErrorSec('max-age=0, stale-if-error=20')).toBe(20);
    expect(staleIfErrorSec('stale-if-error="15", no-transform')).toBe(15);
  });

  it('caps it at 300 seconds and ignores its absence', () => {
    expect(staleIfErrorSec('stale-if-error=86400')).toBe(300);
    expect(staleIfErrorSec(undefined)).toBe(0);
    expect(staleIfErrorSec('no-cache')).toBe(0);
    expect(staleIfErrorSec('max-stale-if-error=5')).toBe(0);
  });
});

describe('freshness', () => {
  it('an entry is fresh for its lifetime, then usable when stale only within the allowed window', () => {
    expect(isFresh(entry, 1_004_999)).toBe(true);
    expect(isFresh(entry, 1_005_000)).toBe(false);
    expect(usableWhenStale(entry, 1_005_000 + 300_000, 300)).toBe(true);
    expect(usableWhenStale(entry, 1_005_000 + 300_001, 300)).toBe(false);
    expect(usableWhenStale(entry, 1_006_000, 0)).toBe(false);
  });

  it('headers keep the original Date and report the age in whole seconds', () => {
    const headers = cacheHeaders(entry, 1_007_900);
    expect(headers).toEqual({
      'cache-control': 'private, max-age=5',
      date: new Date(1_000_000).toUTCString(),
      expires: new Date(1_005_000).toUTCString(),
      age: '7',
    });
  });

  it('the cache evicts its oldest entry when full', () => {
    const cache = new ResponseCache(2);
    cache.set('a', entry);
    cache.set('b', entry);
    cache.set('c', entry);
    expect(cache.get('a')).toBeUndefined();
    expect(cache.get('c')).toBe(entry);
  });
});
