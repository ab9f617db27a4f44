import { isatty } from 'node:tty';
import { type Logger, type LoggerOptions, pino } from 'pino';
import { formatLogLine } from './lib/pretty-log.js';

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

/** `pretty`: lines for a person at a terminal (src/lib/pretty-log.ts); `json`: one JSON object a line. */
export const LOG_FORMATS = ['pretty', 'json'] as const;
export type LogFormat = (typeof LOG_FORMATS)[number];

export interface LoggerSettings {
  /** @defaultValue 'info' */
  level?: string;
  /** @defaultValue 'json' */
  format?: LogFormat;
  /** The file descriptor written to. @defaultValue 1 (stdout) */
  fd?: number;
  /** Colours in `pretty` lines. @defaultValue whether `fd` is a terminal and NO_COLOR is unset */
  colors?: boolean;
}

/** What a process logs in unless told: `pretty` on a terminal, JSON for a pipe, a file or a journal. */
export function defaultLogFormat(fd = 1): LogFormat {
  return isatty(fd) ? 'pretty' : 'json';
}

export function createLogger(settings: LoggerSettings = {}): Logger {
  const level = settings.level ?? 'info';
  const options: LoggerOptions = {
    level,
    redact: { paths: REDACT_PATHS, censor: '[redacted]' },
  };
  const fd = settings.fd ?? 1;
  // Synchronous: an asynchronous write that met a full pipe (EAGAIN) is retried later, and the
  // lines logged meanwhile went out before it (a shutdown's last steps out of order), or were
  // flushed at exit ahead of it. A log line is written, in order, before the call returns.
  // So no pino transport for `pretty` either: it formats in a worker thread, whose lines a
  // process that exits may never write, and after the ones written here.
  const out = pino.destination({ dest: fd, sync: true });
  if (settings.format !== 'pretty') return pino(options, out);
  const pretty = {
    colors: settings.colors ?? (isatty(fd) && !process.env.NO_COLOR),
    // debug (20) and trace (10) show every logged error's stack.
    stacks: (pino.levels.values[level] ?? Number.POSITIVE_INFINITY) <= 20,
  };
  // Formatted from the line pino wrote, its redactions applied.
  return pino(options, { write: (line: string) => out.write(formatLogLine(line, pretty)) });
}
