import { resolve } from 'node:path';
import { readDaemonInfo, readLocalApi } from '../daemon-info.js';
import { ConfigError, type ErrorCode, isErrorCode, SchedflowError } from '../errors.js';
import { pidAlive } from '../lib/pid-lock.js';

/**
 * The CLI's way to the running daemon for what changes something (`jobs submit`, `cancel`,
 * `hold`, `release`, `update`, `retry-tasks`, `resubmit`, `runs trigger`, `cancel`, `hold`,
 * `release`): the daemon's local API, the routes a
 * lab service's token uses, with the credential the daemon published for this start in its
 * data dir (src/daemon-info.ts `local-api.json`, src/http/api/local-credential.ts). So every
 * job request is accepted by the one door (src/requests/accept.ts), the CLI's as the API's.
 * Reading (`list`, `show`, `--wait`) stays on the history, as before.
 */

/** How long a command waits for the daemon's answer (a cancel asks the scheduler, which may be slow). */
const ANSWER_TIMEOUT_MS = 60_000;

/** An error the daemon's API answered with: its code and sentence, as the CLI prints them. */
export class DaemonApiError extends SchedflowError {
  constructor(
    readonly code: ErrorCode,
    message: string,
    /** The HTTP status it came with. */
    readonly status: number,
    /** Seconds the daemon asks to wait before asking again (Retry-After), if it said. */
    readonly retryAfterSec: number | null = null,
  ) {
    super(message);
  }
}

export interface DaemonAnswer<T> {
  status: number;
  body: T;
}

export interface DaemonCall {
  method: 'GET' | 'POST' | 'PATCH' | 'DELETE';
  /** `/api/v1/jobs`, with its ids encoded. */
  path: string;
  body?: unknown;
  /** What is not done when no daemon takes the call, for its sentence: `nothing was queued`. */
  nothing: string;
}

/**
 * Calls the daemon's API; a 2xx answer's body, or a DaemonApiError with the daemon's code and
 * sentence. With no daemon serving the API for `dataDir` it fails at once, saying what to do.
 */
export async function callDaemon<T>(dataDir: string, call: DaemonCall): Promise<DaemonAnswer<T>> {
  const api = readLocalApi(dataDir);
  if (!api || !pidAlive(api.pid)) throw notServed(dataDir, call.nothing);
  let response: Response;
  try {
    response = await fetch(`${reachable(api.url)}${call.path}`, {
      method: call.method,
      headers: {
        authorization: `Bearer ${api.token}`,
        'x-schedflow-who': cliWho(),
        ...(call.body !== undefined && { 'content-type': 'application/json' }),
      },
      ...(call.body !== undefined && { body: JSON.stringify(call.body) }),
      signal: AbortSignal.timeout(ANSWER_TIMEOUT_MS),
    });
  } catch (error) {
    if (error instanceof Error && error.name === 'TimeoutError') {
      throw new DaemonApiError(
        'SCHEDFLOW_ERR_UNAVAILABLE',
        `the daemon's API at ${api.url} did not answer within ${ANSWER_TIMEOUT_MS / 1000} s; see its log, and run this again`,
        503,
      );
    }
    // Refused: the daemon stopped (killed, its file left behind) or its API is closing.
    throw notServed(dataDir, call.nothing);
  }
  const text = await response.text();
  const body = parseJson(text);
  if (response.ok) return { status: response.status, body: body as T };
  throw answeredError(response, body);
}

/** `the daemon … is not running, so nothing was queued: start it …`, or why it takes no request. */
function notServed(dataDir: string, nothing: string): ConfigError {
  const dir = resolve(dataDir);
  // No daemon ever ran here: readDaemonInfo says so, and how to start one.
  const info = readDaemonInfo(dir);
  if (pidAlive(info.pid)) {
    return new ConfigError(
      `the daemon of ${dir} (pid ${info.pid}) does not serve the local API (it runs without the web role, or is still starting or stopping), so ${nothing}: start it with the web role (the default) and run this again`,
    );
  }
  return new ConfigError(
    `the daemon of ${dir} (pid ${info.pid}) is not running, so ${nothing}: start it (npm start, or schedflow start --data-dir ${dir}) and run this again`,
  );
}

/** The daemon's error body `{ error: { code, message, fields } }` as an error of its code. */
function answeredError(response: Response, body: unknown): DaemonApiError {
  const error = (body as { error?: { code?: unknown; message?: unknown; fields?: unknown } } | null)?.error;
  const code: ErrorCode = isErrorCode(error?.code)
    ? error.code
    : response.status >= 500
      ? 'SCHEDFLOW_ERR_UNAVAILABLE'
      : 'SCHEDFLOW_ERR_BAD_REQUEST';
  let message = typeof error?.message === 'string' ? error.message : `the daemon answered ${response.status}`;
  // A field the API names is one the CLI filled in: its reason alone says what to fix.
  const fields = Array.isArray(error?.fields) ? (error.fields as { reason?: unknown }[]) : [];
  const reasons = fields.map((f) => f.reason).filter((r): r is string => typeof r === 'string');
  if (code === 'SCHEDFLOW_ERR_VALIDATION' && reasons.length > 0) message = reasons.join('; ');
  const retryAfter = Number(response.headers.get('retry-after'));
  return new DaemonApiError(code, message, response.status, Number.isFinite(retryAfter) ? retryAfter : null);
}

function parseJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}

/** A wildcard address the API listens on is reached on loopback. */
function reachable(url: string): string {
  const u = new URL(url);
  if (u.hostname === '0.0.0.0') u.hostname = '127.0.0.1';
  if (u.hostname === '[::]') u.hostname = '[::1]';
  return u.origin;
}

/** The Unix user running the CLI, as the history and the audit log name it (`cli:<user>`). */
export function cliUser(): string {
  const user = process.env.USER ?? process.env.LOGNAME ?? 'unknown user';
  // A header carries printable ASCII; the daemon escapes what it shows anyway.
  return user.replace(/[^\x20-\x7e]/g, '?');
}

/** Who asks, for the history and the daemon's log: `CLI (alice, pid 4242)`. */
export function cliWho(): string {
  return `CLI (${cliUser()}, pid ${process.pid})`;
}

/** A path segment: an id or a name as the user gave it. */
export const segment = (value: string): string => encodeURIComponent(value);
