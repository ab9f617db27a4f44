import { randomBytes } from 'node:crypto';

/**
 * A UUID version 7 (RFC 9562): the Unix time in milliseconds, then 74 random bits. Ids made one
 * after another sort together, so a row's id lands next to the last one's in every index keyed
 * on it (the request's primary key, its transitions'): with random (v4) ids each new row dirtied
 * a page of its own in each of them, and a commit wrote that many pages more.
 */
export function timeOrderedId(nowMs: number = Date.now()): string {
  const bytes = randomBytes(16);
  bytes.writeUIntBE(nowMs, 0, 6);
  bytes[6] = ((bytes[6] as number) & 0x0f) | 0x70;
  bytes[8] = ((bytes[8] as number) & 0x3f) | 0x80;
  const hex = bytes.toString('hex');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}
