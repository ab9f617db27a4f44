import { escapeControls } from './control-characters.js';

/**
 * pino's JSON lines as a person at a terminal reads them:
 *
 *   14:02:07.311 WARN  [reconcile] accounting import failed; will retry profile=demo code=SCHEDFLOW_ERR_… err="…"
 *
 * time of day, level, component, message, then the other fields as key=value. An error logged
 * with a line shows its message there; its stack follows only where it helps: at the error and
 * fatal levels, for a bug (a TypeError and its kin), or when the log level is debug or trace.
 * An expected condition (the scheduler away, a webhook receiver down, each said with "will
 * retry") is one line, so that the warnings that matter are not lost among stack traces.
 *
 * It formats the line pino has written, redactions applied (src/logger.ts), so nothing is
 * shown here that the JSON would not show.
 */

export interface PrettyLogOptions {
  /** ANSI colours for the level (a terminal that did not ask for none: NO_COLOR). */
  colors: boolean;
  /** Every logged error's stack: the log level is debug or trace. */
  stacks: boolean;
}

const LEVELS: Readonly<Record<number, { label: string; color: string }>> = {
  10: { label: 'TRACE', color: '\x1b[90m' },
  20: { label: 'DEBUG', color: '\x1b[90m' },
  30: { label: 'INFO', color: '\x1b[32m' },
  40: { label: 'WARN', color: '\x1b[33m' },
  50: { label: 'ERROR', color: '\x1b[31m' },
  60: { label: 'FATAL', color: '\x1b[1;31m' },
};
const RESET = '\x1b[0m';
const DIM = '\x1b[2m';
const ERROR_LEVEL = 50;

/** Fields shown in places of their own, or not at all (one host, one process: said at start). */
const PLACED = new Set(['level', 'time', 'pid', 'hostname', 'msg', 'component', 'err']);

/** Errors that are mistakes in the code rather than conditions of the world: their stack is the point. */
const BUGS = new Set(['TypeError', 'ReferenceError', 'RangeError', 'SyntaxError', 'AssertionError']);

interface SerializedError {
  type?: unknown;
  message?: unknown;
  stack?: unknown;
  code?: unknown;
}

export function formatLogLine(line: string, options: PrettyLogOptions): string {
  let entry: Record<string, unknown>;
  try {
    const parsed: unknown = JSON.parse(line);
    if (typeof parsed !== 'object' || parsed === null) return line;
    entry = parsed as Record<string, unknown>;
  } catch {
    return line; // not one of pino's lines: as it came
  }
  const levelNumber = typeof entry.level === 'number' ? entry.level : 0;
  const level = LEVELS[levelNumber] ?? { label: String(entry.level ?? ''), color: '' };
  const paint = (text: string, color: string) => (options.colors && color ? `${color}${text}${RESET}` : text);

  const head: string[] = [];
  if (typeof entry.time === 'number') head.push(paint(clock(entry.time), DIM));
  head.push(paint(level.label.padEnd(5), level.color));
  if (typeof entry.component === 'string') head.push(`[${text(entry.component)}]`);
  if (typeof entry.msg === 'string' && entry.msg) head.push(text(entry.msg));
  for (const [key, value] of Object.entries(entry)) {
    if (!PLACED.has(key)) head.push(`${text(key)}=${fieldValue(value)}`);
  }

  let stack = '';
  const err = entry.err;
  if (typeof err === 'string') {
    head.push(`err=${fieldValue(err)}`);
  } else if (typeof err === 'object' && err !== null) {
    const e = err as SerializedError;
    const showStack =
      typeof e.stack === 'string' &&
      (options.stacks || levelNumber >= ERROR_LEVEL || (typeof e.type === 'string' && BUGS.has(e.type)));
    if (showStack) {
      stack = (e.stack as string)
        .split('\n')
        // Under the line: the error's own lines by 4, its frames by 6.
        .map((l) => `${/^\s+at /.test(l) ? '      ' : '    '}${escapeControls(l.trimStart())}\n`)
        .join('');
    } else {
      if (typeof e.code === 'string' && !('code' in entry)) head.push(`code=${fieldValue(e.code)}`);
      head.push(`err=${fieldValue(typeof e.message === 'string' ? e.message : JSON.stringify(err))}`);
    }
  }
  return `${head.join(' ')}\n${stack}`;
}

/** Local time of day, to the millisecond: the date is the terminal's session's. */
function clock(ms: number): string {
  const d = new Date(ms);
  const two = (n: number) => String(n).padStart(2, '0');
  return `${two(d.getHours())}:${two(d.getMinutes())}:${two(d.getSeconds())}.${String(d.getMilliseconds()).padStart(3, '0')}`;
}

/** Text on one line, with what a terminal would obey shown as escapes. */
function text(value: string): string {
  return escapeControls(value.replace(/\r?\n/g, '\\n').replace(/\t/g, '\\t'));
}

/** A field's value: a plain word as it is, other text quoted, anything else as compact JSON. */
function fieldValue(value: unknown): string {
  if (typeof value === 'string') return /^[\w.,:/@+%-]+$/u.test(value) ? value : text(JSON.stringify(value));
  return text(JSON.stringify(value) ?? String(value));
}
