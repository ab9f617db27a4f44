/**
 * The proxy's GET cache (contract section 4, "Caching"): answers are kept for a
 * per-endpoint lifetime; a request that says `Cache-Control: stale-if-error=N`
 * may be given an expired answer, up to N (at most 300) seconds past expiry,
 * when the scheduler cannot be reached.
 */
export interface CachedResponse {
  status: number;
  body: string;
  storedAtMs: number;
  ttlSec: number;
}

export const MAX_STALE_IF_ERROR_SEC = 300;

export class ResponseCache {
  private readonly entries = new Map<string, CachedResponse>();

  constructor(private readonly maxEntries = 10_000) {}

  get(key: string): CachedResponse | undefined {
    return this.entries.get(key);
  }

  set(key: string, entry: CachedResponse): void {
    // Oldest-first eviction keeps memory bounded under many distinct queries.
    if (this.entries.size >= this.maxEntries && !this.entries.has(key)) {
      const oldest = this.entries.keys().next().value;
      if (oldest !== undefined) this.entries.delete(oldest);
    }
    this.entries.delete(key);
    this.entries.set(key, entry);
  }
}

export function ageSec(entry: CachedResponse, nowMs: number): number {
  return Math.max(0, Math.floor((nowMs - entry.storedAtMs) / 1000));
}

export function isFresh(entry: CachedResponse, nowMs: number): boolean {
  return nowMs - entry.storedAtMs < entry.ttlSec * 1000;
}

/** Seconds of staleness the request accepts on upstream error (0 when it did not ask). */
export function staleIfErrorSec(cacheControl: string | undefined): number {
  if (!cacheControl) return 0;
  const match = /(?:^|,)\s*stale-if-error\s*=\s*"?(\d+)"?\s*(?:,|$)/i.exec(cacheControl);
  if (!match?.[1]) return 0;
  return Math.min(Number(match[1]), MAX_STALE_IF_ERROR_SEC);
}

/** Whether an expired entry may still be served for a request that allows `allowedSec` of staleness. */
export function usableWhenStale(entry: CachedResponse, nowMs: number, allowedSec: number): boolean {
  if (allowedSec <= 0) return false;
  const expiresAtMs = entry.storedAtMs + entry.ttlSec * 1000;
  return nowMs - expiresAtMs <= allowedSec * 1000;
}

/** `Cache-Control`, `Date`, `Expires` and `Age` for an answer stored at `storedAtMs`. */
export function cacheHeaders(entry: CachedResponse, nowMs: number): Record<string, string> {
  return {
    'cache-control': `private, max-age=${entry.ttlSec}`,
    date: new Date(entry.storedAtMs).toUTCString(),
    expires: new Date(entry.storedAtMs + entry.ttlSec * 1000).toUTCString(),
    age: String(ageSec(entry, nowMs)),
  };
}
