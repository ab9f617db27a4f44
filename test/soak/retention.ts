/**
 * The retention settings the soak runs the daemon with (names from issue 35's shared plan,
 * implemented by the retention branch): minutes instead of days, so that a run of N minutes
 * spans about six retention periods of requests, as a deployment's default 90 days does in
 * a year and a half. A daemon that does not know them ignores them, and its history grows.
 */
export function retentionSettings(runMinutes: number): Record<string, string> {
  const base = Math.max(2, Math.round(runMinutes / 6));
  const m = (factor: number) => `${Math.max(1, Math.round(base * factor))}m`;
  return {
    SCHEDFLOW_RETAIN_REQUESTS: m(1),
    SCHEDFLOW_RETAIN_SUMMARIES: m(1.5),
    SCHEDFLOW_RETAIN_DELIVERIES: m(0.5),
    SCHEDFLOW_RETAIN_ACCOUNTING: m(0.5),
    SCHEDFLOW_RETAIN_RUNS: m(1),
    SCHEDFLOW_RETAIN_AUDIT: m(2),
    // The pruner's default is 10 min; a run of minutes needs it every minute.
    SCHEDFLOW_PRUNE_EVERY_MS: '60000',
  };
}
