import { createHmac, timingSafeEqual } from 'node:crypto';
import { Secret } from '../lib/secret.js';

/**
 * Webhook signatures, in Stripe's scheme
 * (https://docs.stripe.com/webhooks#verify-manually):
 *
 *   Schedflow-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">
 *
 * The timestamp is signed with the body, so a captured request cannot be
 * replayed later than the receiver's tolerance; a fresh one is made for every
 * attempt. Receivers compute the HMAC over the raw bytes they received (not a
 * re-serialised JSON) and compare in constant time. Several `v1` entries may
 * appear (for example while a secret is being rotated): one matching is enough.
 */

export const SIGNATURE_HEADER = 'schedflow-signature';
/** How far a signature's timestamp may be from the receiver's clock. */
export const DEFAULT_TOLERANCE_SEC = 300;

const HEX_SHA256 = /^[0-9a-f]{64}$/;

function keyOf(secret: Secret | string): string {
  return secret instanceof Secret ? secret.reveal() : secret;
}

/** Hex HMAC-SHA256 of `<timestampSec>.<rawBody>`. */
export function computeSignature(rawBody: string | Buffer, timestampSec: number, secret: Secret | string): string {
  return createHmac('sha256', keyOf(secret)).update(`${timestampSec}.`).update(rawBody).digest('hex');
}

/** The `Schedflow-Signature` value for a body sent now. */
export function signatureHeader(rawBody: string | Buffer, secret: Secret | string, nowMs = Date.now()): string {
  const t = Math.floor(nowMs / 1000);
  return `t=${t},v1=${computeSignature(rawBody, t, secret)}`;
}

export interface ParsedSignature {
  timestampSec: number | null;
  /** Every `v1` value, as given. */
  signatures: string[];
}

/** Reads `t=…,v1=…[,v1=…]`; unknown keys (future schemes) are ignored. */
export function parseSignatureHeader(header: string): ParsedSignature {
  let timestampSec: number | null = null;
  const signatures: string[] = [];
  for (const part of header.split(',')) {
    const eq = part.indexOf('=');
    if (eq < 0) continue;
    const key = part.slice(0, eq).trim();
    const value = part.slice(eq + 1).trim();
    if (key === 't' && /^\d+$/.test(value)) timestampSec = Number(value);
    else if (key === 'v1') signatures.push(value);
  }
  return { timestampSec, signatures };
}

export interface VerifyOptions {
  /** Largest accepted distance between the signature's time and now. @defaultValue 300 */
  toleranceSec?: number;
  /** The receiver's clock, in Unix milliseconds. @defaultValue Date.now() */
  now?: number;
}

export type SignatureCheck =
  | { ok: true; timestampSec: number }
  | { ok: false; problem: 'missing' | 'malformed' | 'expired' | 'mismatch'; message: string };

/** Checks a signature and says what is wrong with it; `verifySignature` is the yes/no form. */
export function checkSignature(
  rawBody: string | Buffer,
  header: string | readonly string[] | null | undefined,
  secret: Secret | string,
  options: VerifyOptions = {},
): SignatureCheck {
  const value = Array.isArray(header) ? header.join(',') : (header as string | null | undefined);
  if (!value) return { ok: false, problem: 'missing', message: 'no Schedflow-Signature header' };
  const { timestampSec, signatures } = parseSignatureHeader(value);
  if (timestampSec === null || signatures.length === 0) {
    return { ok: false, problem: 'malformed', message: 'Schedflow-Signature lacks t= or v1=' };
  }
  const toleranceSec = options.toleranceSec ?? DEFAULT_TOLERANCE_SEC;
  const nowSec = Math.floor((options.now ?? Date.now()) / 1000);
  if (Math.abs(nowSec - timestampSec) > toleranceSec) {
    return {
      ok: false,
      problem: 'expired',
      message: `signature time is ${nowSec - timestampSec} s from now (tolerance ${toleranceSec} s)`,
    };
  }
  const expected = Buffer.from(computeSignature(rawBody, timestampSec, secret), 'hex');
  // Checking the shape first keeps timingSafeEqual to equal lengths; the shape says nothing about the secret.
  const matches = signatures.some((s) => HEX_SHA256.test(s) && timingSafeEqual(Buffer.from(s, 'hex'), expected));
  if (!matches) return { ok: false, problem: 'mismatch', message: 'no v1 signature matches the body' };
  return { ok: true, timestampSec };
}

/**
 * True when the header carries a valid signature of `rawBody` made with
 * `secret` within `toleranceSec` of `now`. For receivers and tests.
 */
export function verifySignature(
  rawBody: string | Buffer,
  header: string | readonly string[] | null | undefined,
  secret: Secret | string,
  options: VerifyOptions = {},
): boolean {
  return checkSignature(rawBody, header, secret, options).ok;
}
