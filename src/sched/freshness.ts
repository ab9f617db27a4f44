/**
 * How fresh an answer is, from the headers the proxy sends (contract section 4,
 * "Caching"): `Date` when the answer was produced, `Age` how long it sat in the
 * cache, `Cache-Control: max-age` its lifetime, `Expires` the end of that lifetime.
 */
export interface Freshness {
  /** When schedflow received the answer (its own clock). */
  fetchedAt: Date;
  /** When the upstream produced it: now minus Age, by our clock, so clock skew does not matter. */
  producedAt: Date;
  ageSec: number;
  /** Lifetime in seconds, when the answer states one. */
  maxAgeSec: number | null;
  /** When it stops being fresh, by our clock; null when it states no lifetime. */
  expiresAt: Date | null;
  /** True when it was served past its lifetime (stale-if-error during an outage). */
  stale: boolean;
}

function header(headers: Record<string, string | string[] | undefined>, name: string): string | undefined {
  const value = headers[name];
  return Array.isArray(value) ? value[0] : value;
}

export function maxAgeOf(cacheControl: string | undefined): number | null {
  const match = /(?:^|,)\s*(?:s-maxage|max-age)\s*=\s*"?(\d+)"?/i.exec(cacheControl ?? '');
  return match?.[1] ? Number(match[1]) : null;
}

export function freshnessOf(
  headers: Record<string, string | string[] | undefined>,
  fetchedAtMs = Date.now(),
): Freshness {
  const ageHeader = Number(header(headers, 'age'));
  const dateMs = Date.parse(header(headers, 'date') ?? '');
  const expiresMs = Date.parse(header(headers, 'expires') ?? '');
  let maxAgeSec = maxAgeOf(header(headers, 'cache-control'));
  if (maxAgeSec === null && !Number.isNaN(expiresMs) && !Number.isNaN(dateMs)) {
    maxAgeSec = Math.max(0, Math.round((expiresMs - dateMs) / 1000));
  }
  // Age is authoritative (RFC 9111 §4.2.3); without it, the Date header against our clock.
  const ageSec = Number.isFinite(ageHeader)
    ? ageHeader
    : Number.isNaN(dateMs)
      ? 0
      : Math.max(0, Math.round((fetchedAtMs - dateMs) / 1000));
  const producedAtMs = fetchedAtMs - ageSec * 1000;
  const warning = header(headers, 'warning') ?? '';
  const stale = (maxAgeSec !== null && ageSec > maxAgeSec) || /\b11[01]\b/.test(warning);
  return {
    fetchedAt: new Date(fetchedAtMs),
    producedAt: new Date(producedAtMs),
    ageSec,
    maxAgeSec,
    expiresAt: maxAgeSec === null ? null : new Date(producedAtMs + maxAgeSec * 1000),
    stale,
  };
}
