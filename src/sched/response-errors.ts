import { isRetryableStatus, parseRetryAfterMs } from '../lib/retry-policy.js';
import {
  AuthenticationError,
  BadRequestError,
  ForbiddenError,
  JobNotFoundError,
  RateLimitedError,
  RequestTimeoutError,
  type SchedApiError,
  type SchedUpstreamDetail,
  type SlurmErrorEntry,
  SlurmRefusedError,
  SubmitLimitError,
  UnexpectedResponseError,
  UnsupportedVersionError,
  UpstreamUnavailableError,
} from './sched-errors.js';

type Json = Record<string, unknown>;

/** ESLURM_ACCOUNTING_POLICY: over a submit limit now, accepted later. */
const SLURM_ACCOUNTING_POLICY = 2050;
/**
 * Slurm errors that say slurmrestd could not reach slurmctld or slurmdbd (stopped, restarting,
 * unreachable), not that the request is wrong: SLURM_COMMUNICATIONS_* (1001-1004, 1006),
 * SLURMCTLD_COMMUNICATIONS_* (1800-1804), SLURM_PROTOCOL_SOCKET_IMPL_TIMEOUT (5004) and
 * ESLURM_DB_CONNECTION (7000). Real slurmrestd answers them as HTTP 500 (or 502) with the
 * error in errors[], like a refusal; they are outages, and the same request succeeds later.
 */
const SLURM_UNREACHABLE: ReadonlySet<number> = new Set([
  1001, 1002, 1003, 1004, 1006, 1800, 1801, 1802, 1803, 1804, 5004, 7000,
]);

/** SLURM_PROTOCOL_AUTHENTICATION_ERROR: slurmctld refused the user's credential. */
const SLURM_PROTOCOL_AUTHENTICATION_ERROR = 1007;

const str = (value: unknown): string | null => (typeof value === 'string' && value !== '' ? value : null);

/** slurmrestd's `errors[]`, tolerant of partial entries. */
export function slurmErrorsOf(body: unknown): SlurmErrorEntry[] {
  const errors = (body as Json | null)?.errors;
  if (!Array.isArray(errors)) return [];
  return errors
    .filter((e): e is Json => typeof e === 'object' && e !== null)
    .map((e) => ({
      error_number: typeof e.error_number === 'number' ? e.error_number : null,
      error: str(e.error),
      description: str(e.description),
      source: str(e.source),
    }));
}

/** The upstream's own words, from whichever shape it answered in (proxy JSON, slurmrestd, text). */
export function upstreamMessage(body: unknown, text: string): string | null {
  if (body && typeof body === 'object') {
    const b = body as Json;
    const direct = str(b.message) ?? str(b.detail) ?? str(b.error);
    if (direct) return direct;
    const first = slurmErrorsOf(body)[0];
    if (first) return [first.error, first.description].filter(Boolean).join(': ') || null;
  }
  const trimmed = text.trim();
  return trimmed === '' ? null : trimmed.slice(0, 500);
}

export interface FailedResponse {
  status: number;
  body: unknown;
  text: string;
  request: string;
  retryAfter?: string | undefined;
  /** The profile's account, to say which account a 403 is about. */
  account?: string | undefined;
}

/** Turns a non-2xx answer into the typed error that says what happened and what to do. */
export function errorForResponse(res: FailedResponse): SchedApiError {
  const slurmErrors = slurmErrorsOf(res.body);
  const message = upstreamMessage(res.body, res.text);
  const detail: SchedUpstreamDetail = { status: res.status, message, slurmErrors, request: res.request };
  const said = message ? `: ${message}` : '';
  const hasSlurmError = slurmErrors.some((e) => e.error_number !== null && e.error_number !== 0);

  if (res.status === 400 && /version/i.test(message ?? '')) {
    return new UnsupportedVersionError(
      `${res.request} was refused (400${said}); pin an API version the scheduler supports`,
      detail,
    );
  }
  // slurmrestd passes a token through to slurmctld unchecked: a bad or expired JWT comes back
  // from there as HTTP 511 with Slurm error 1007 (even /ping answers 200 with such a token).
  if (res.status === 511 || slurmErrors.some((e) => e.error_number === SLURM_PROTOCOL_AUTHENTICATION_ERROR)) {
    return new AuthenticationError(
      `Slurm refused the credential for ${res.request} (HTTP ${res.status}${said}); check that the token (JWT) is valid and not expired`,
      detail,
    );
  }
  if (res.status === 401) {
    return new AuthenticationError(
      `the scheduler refused the credential for ${res.request} (401${said}); check that the token is valid and not expired`,
      detail,
    );
  }
  if (res.status === 403) {
    const reason = /scope/i.test(message ?? '') ? 'scope' : /account/i.test(message ?? '') ? 'account' : 'unknown';
    const advice =
      reason === 'scope'
        ? 'the token lacks the scope this operation needs; ask the operator for it'
        : reason === 'account'
          ? `the token is bound to a single account and may submit and cancel jobs of that account only${res.account ? ` (this profile names account "${res.account}")` : ''}`
          : 'the token is not allowed to do this';
    return new ForbiddenError(`${res.request} was forbidden (403${said}): ${advice}`, detail, reason);
  }
  if (res.status === 429) {
    return new RateLimitedError(`${res.request} was rate limited (429${said}); backing off`, detail, {
      retryAfterMs: parseRetryAfterMs(res.retryAfter),
    });
  }
  // A read cannot be refused the way a job can: slurmrestd answers 500 "Unspecified error" (-1)
  // to jobs/state while slurmctld is down.
  const unreachable = slurmErrors.find(
    (e) =>
      e.error_number !== null &&
      (SLURM_UNREACHABLE.has(e.error_number) || (e.error_number === -1 && res.request.startsWith('GET '))),
  );
  if (res.status >= 500 && unreachable) {
    return new UpstreamUnavailableError(
      `the scheduler is unavailable for ${res.request} (HTTP ${res.status}: ${unreachable.error ?? 'error'}, Slurm error ${unreachable.error_number}); will retry`,
      detail,
    );
  }
  if (res.status >= 500 && hasSlurmError) {
    const first = slurmErrors.find((e) => e.error_number) ?? slurmErrors[0];
    if (first?.error_number === SLURM_ACCOUNTING_POLICY) {
      return new SubmitLimitError(
        `Slurm holds back ${res.request}: ${first.error ?? 'accounting/QOS policy'} (error 2050); it is submitted once other jobs of the user end`,
        detail,
      );
    }
    return new SlurmRefusedError(
      `Slurm refused ${res.request}: ${first?.error ?? 'error'} (error ${first?.error_number})${first?.description ? ` — ${first.description}` : ''}`,
      detail,
    );
  }
  // The policy's other retryable statuses: 408 (the proxy timed the request out) and 5xx.
  if (res.status === 408) {
    return new RequestTimeoutError(`${res.request} timed out at the scheduler (408${said}); will retry`, detail);
  }
  if (isRetryableStatus(res.status)) {
    return new UpstreamUnavailableError(
      `the scheduler is unavailable for ${res.request} (HTTP ${res.status}${said}); try again later`,
      detail,
    );
  }
  if (res.status === 404 && slurmErrors.some((e) => e.error_number === 2017)) {
    return new JobNotFoundError(`${res.request}: the controller does not know this job (404${said})`, detail);
  }
  if (res.status >= 400) {
    return new BadRequestError(`${res.request} was refused (HTTP ${res.status}${said})`, detail);
  }
  return new UnexpectedResponseError(`${res.request} answered HTTP ${res.status}${said}`, detail);
}
