import { describe, expect, it } from 'vitest';
import { timeOrderedId } from '../../src/lib/time-ordered-id.js';

describe('timeOrderedId', () => {
  it('is a UUID of version 7 and RFC 9562 variant, carrying the time in milliseconds', () => {
    const at = Date.UTC(2026, 10, 30, 7, 30, 0, 123);
    const id = timeOrderedId(at);
    expect(id).toMatch(/^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/);
    expect(Number.parseInt(id.replace(/-/g, '').slice(0, 12), 16)).toBe(at);
  });

  it('sorts by time: ids made later sort after, whatever their random bits', () => {
    const start = Date.now();
    const ids = Array.from({ length: 1000 }, (_, i) => timeOrderedId(start + i));
    expect([...ids].sort()).toEqual(ids);
    expect(new Set(ids).size).toBe(ids.length);
  });

  it('differs within one millisecond', () => {
    const at = Date.now();
    const ids = new Set(Array.from({ length: 10_000 }, () => timeOrderedId(at)));
    expect(ids.size).toBe(10_000);
  });
});
