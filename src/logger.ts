import { type Logger, type LoggerOptions, pino } from 'pino';

export type { Logger };

/**
 * Paths pino replaces before anything is written. Tokens and keys reach the
 * logger only by mistake; this makes the mistake harmless.
 */
export const REDACT_PATHS = [
  'token',
  '*.token',
  'apiKey',
  '*.apiKey',
  'password',
  '*.password',
  'authorization',
  '*.authorization',
  'headers.authorization',
  'req.headers.authorization',
  'req.headers["x-sched-user-token"]',
  'req.headers["x-slurm-user-token"]',
  'req.headers.cookie',
];

export interface LoggerSettings {
  /** @defaultValue 'info' */
  level?: string;
  /** Human-readable lines instead of JSON (for a terminal). */
  pretty?: boolean;
}

export function createLogger(settings: LoggerSettings = {}): Logger {
  const options: LoggerOptions = {
    level: settings.level ?? 'info',
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
  };
  if (settings.pretty) {
    return pino({
      ...options,
      transport: { target: 'pino-pretty', options: { colorize: true, ignore: 'pid,hostname' } },
    });
  }
  // Synchronous: an asynchronous write that met a full pipe (EAGAIN) is retried later, and the
  // lines logged meanwhile went out before it (a shutdown's last steps out of order), or were
  // flushed at exit ahead of it. A log line is written, in order, before the call returns.
  return pino(options, pino.destination({ dest: 1, sync: true }));
}
