import { createHmac } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { Secret } from '../../src/lib/secret.js';
import { MAX_RETRY_AFTER_MS, webhookRetryDelayMs } from '../../src/notify/retry-policy.js';
import { receiverOrigin } from '../../src/notify/sender.js';
import {
  checkSignature,
  computeSignature,
  parseSignatureHeader,
  signatureHeader,
  verifySignature,
} from '../../src/notify/signature.js';

const SECRET = 'a3f1c2d4e5b6a7980112233445566778899aabbccddeeff00112233445566778';
const BODY = '{"event":"job.finished","id":"d1","request":{"state":"completed"}}';
const NOW = Date.UTC(2025, 0, 2, 3, 4, 5);
const T = Math.floor(NOW / 1000);

describe('signing', () => {
  it('is t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">', () => {
    const expected = createHmac('sha256', SECRET).update(`${T}.${BODY}`).digest('hex');
    expect(signatureHeader(BODY, SECRET, NOW)).toBe(`t=${T},v1=${expected}`);
    expect(computeSignature(Buffer.from(BODY), T, new Secret(SECRET))).toBe(expected);
  });

  it('a Secret and its text sign the same', () => {
    expect(signatureHeader(BODY, new Secret(SECRET), NOW)).toBe(signatureHeader(BODY, SECRET, NOW));
  });

  it('reads the header, ignoring unknown schemes and keeping every v1', () => {
    expect(parseSignatureHeader(`t=${T}, v1=aa ,v0=zz,v1=bb,junk`)).toEqual({
      timestampSec: T,
      signatures: ['aa', 'bb'],
    });
    expect(parseSignatureHeader('v1=aa')).toEqual({ timestampSec: null, signatures: ['aa'] });
  });
});

describe('verifySignature', () => {
  const header = signatureHeader(BODY, SECRET, NOW);

  it('accepts the body it signed, with the secret, within the tolerance', () => {
    expect(verifySignature(BODY, header, SECRET, { now: NOW })).toBe(true);
    expect(verifySignature(Buffer.from(BODY), header, new Secret(SECRET), { now: NOW + 299_000 })).toBe(true);
    expect(verifySignature(BODY, header, SECRET, { now: NOW - 299_000 })).toBe(true);
  });

  it('rejects another secret', () => {
    expect(checkSignature(BODY, header, `${SECRET}x`, { now: NOW })).toMatchObject({ ok: false, problem: 'mismatch' });
  });

  it('rejects a changed body, even by one byte or whitespace', () => {
    expect(verifySignature(BODY.replace('completed', 'failed'), header, SECRET, { now: NOW })).toBe(false);
    expect(verifySignature(`${BODY} `, header, SECRET, { now: NOW })).toBe(false);
    expect(verifySignature(JSON.stringify(JSON.parse(BODY), null, 2), header, SECRET, { now: NOW })).toBe(false);
  });

  it('rejects an old timestamp (a replay) and one far in the future', () => {
    expect(checkSignature(BODY, header, SECRET, { now: NOW + 301_000 })).toMatchObject({
      ok: false,
      problem: 'expired',
    });
    expect(verifySignature(BODY, header, SECRET, { now: NOW - 301_000 })).toBe(false);
    expect(verifySignature(BODY, header, SECRET, { now: NOW + 3_600_000, toleranceSec: 7200 })).toBe(true);
  });

  it('rejects a timestamp changed without re-signing', () => {
    const moved = header.replace(`t=${T}`, `t=${T + 1}`);
    expect(verifySignature(BODY, moved, SECRET, { now: NOW })).toBe(false);
  });

  it('rejects missing and malformed headers, and malformed signatures, without throwing', () => {
    expect(checkSignature(BODY, undefined, SECRET)).toMatchObject({ ok: false, problem: 'missing' });
    expect(checkSignature(BODY, '', SECRET)).toMatchObject({ ok: false, problem: 'missing' });
    expect(checkSignature(BODY, 'v1=abc', SECRET, { now: NOW })).toMatchObject({ ok: false, problem: 'malformed' });
    expect(checkSignature(BODY, `t=${T}`, SECRET, { now: NOW })).toMatchObject({ ok: false, problem: 'malformed' });
    expect(verifySignature(BODY, `t=${T},v1=abc`, SECRET, { now: NOW })).toBe(false);
    expect(verifySignature(BODY, `t=${T},v1=${'zz'.repeat(32)}`, SECRET, { now: NOW })).toBe(false);
  });

  it('accepts when one of several v1 signatures matches (secret rotation)', () => {
    const old = signatureHeader(BODY, 'old-secret', NOW).split(',')[1];
    expect(verifySignature(BODY, `${header},${old}`, 'old-secret', { now: NOW })).toBe(true);
    expect(verifySignature(BODY, `${header},${old}`, SECRET, { now: NOW })).toBe(true);
  });

  it('takes a header given as an array (node:http for repeated headers)', () => {
    expect(verifySignature(BODY, [header], SECRET, { now: NOW })).toBe(true);
  });
});

describe('retry delays', () => {
  const noJitter = () => 1;

  it('double from the base, with jitter between half and all of the step', () => {
    expect([1, 2, 3, 4].map((n) => webhookRetryDelayMs(n, 2000, null, noJitter))).toEqual([2000, 4000, 8000, 16000]);
    expect(webhookRetryDelayMs(3, 2000, null, () => 0)).toBe(4000);
    for (let i = 0; i < 50; i++) {
      const d = webhookRetryDelayMs(2, 2000);
      expect(d).toBeGreaterThanOrEqual(2000);
      expect(d).toBeLessThanOrEqual(4000);
    }
  });

  it('are never sooner than Retry-After, which is bounded', () => {
    expect(webhookRetryDelayMs(1, 2000, 30_000, noJitter)).toBe(30_000);
    expect(webhookRetryDelayMs(4, 2000, 1000, noJitter)).toBe(16_000);
    expect(webhookRetryDelayMs(1, 2000, 7 * 24 * 3_600_000, noJitter)).toBe(MAX_RETRY_AFTER_MS);
  });
});

describe('receiverOrigin', () => {
  it('keeps scheme, host and port only: never path, query or user info', () => {
    expect(receiverOrigin('https://bob:pw@hooks.example.org:8443/t/SECRET?k=SECRET#x')).toBe(
      'https://hooks.example.org:8443',
    );
    expect(receiverOrigin('https://hooks.example.org/SECRET')).toBe('https://hooks.example.org');
    expect(receiverOrigin('http://[::1]:9000/SECRET')).toBe('http://[::1]:9000');
    expect(receiverOrigin('not a url SECRET')).toBe('(invalid URL)');
  });
});
