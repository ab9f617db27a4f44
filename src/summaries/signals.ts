/** Names of the signals that end jobs, for summaries that say how a job ended. */

/** Signal numbers of Linux x86-64/arm64 that end jobs, by name. */
const SIGNALS: Record<number, string> = {
  1: 'SIGHUP',
  2: 'SIGINT',
  4: 'SIGILL',
  6: 'SIGABRT',
  7: 'SIGBUS',
  8: 'SIGFPE',
  9: 'SIGKILL',
  11: 'SIGSEGV',
  13: 'SIGPIPE',
  15: 'SIGTERM',
  24: 'SIGXCPU',
  25: 'SIGXFSZ',
};

export function signalName(signal: number): string {
  return SIGNALS[signal] ?? `signal ${signal}`;
}
