import { ValidationApiError } from './api-errors.js';

/**
 * Opaque page cursors: the sort key of the last item of a page, as
 * base64url JSON. Keyset paging (rather than offsets) keeps pages stable while
 * new rows arrive at the top.
 */
export function encodeCursor(key: readonly (string | number)[]): string {
  return Buffer.from(JSON.stringify(key), 'utf8').toString('base64url');
}

/** The key of a cursor, checked against the element types it must have; a 400 naming `cursor` otherwise. */
export function decodeCursor<T extends readonly ('string' | 'number')[]>(
  cursor: string,
  types: T,
): { [K in keyof T]: T[K] extends 'number' ? number : string } {
  let key: unknown;
  try {
    key = JSON.parse(Buffer.from(cursor, 'base64url').toString('utf8'));
  } catch {
    key = undefined;
  }
  // Every number of our keys is an integer (times in ms, ids): JSON reads 1e999 as Infinity, and
  // PostgreSQL refused it, or 1.5, for a bigint with a 500.
  const valid =
    Array.isArray(key) &&
    key.length === types.length &&
    key.every((value, i) => typeof value === types[i] && (typeof value !== 'number' || Number.isSafeInteger(value)));
  if (!valid) {
    throw new ValidationApiError([
      { in: 'query', path: 'cursor', reason: 'not a cursor of this list: pass the `next` of the page before' },
    ]);
  }
  return key as { [K in keyof T]: T[K] extends 'number' ? number : string };
}
