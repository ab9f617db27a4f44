import { appendAudit } from '../db/audit.js';
import type { History } from '../db/history.js';
import { acceptedSince, inFlightCount, tokenLimitsByName } from '../db/quotas.js';
import { AdmissionRefusedError } from '../errors.js';
import { tokenActor, uiActor } from './principal.js';

/**
 * A token's bindings and quotas (`schedflow tokens create|update --profiles --max-in-flight
 * --max-per-day`): which scheduler profiles its requests may name, how many of them may be
 * unfinished at once, and how many may be accepted in 24 hours. See docs/quotas.md.
 *
 * Every request a token makes counts, whatever the route (a submission, `retry-tasks`, a
 * `resubmit`, one made in the web UI logged in with the token), except a pipeline run's steps:
 * those are the run's, and a run half made is worse than one refused at its trigger.
 */

/** The window of `--max-per-day`: the last 24 hours, sliding, not a calendar day. */
export const QUOTA_DAY_MS = 24 * 60 * 60 * 1000;

/**
 * Retry-After of an in-flight refusal: when a request of the token ends is not known in
 * advance, and half a minute is about what a short job or a poll of the scheduler takes.
 */
export const IN_FLIGHT_RETRY_AFTER_SEC = 30;

/** The token whose requests `actor` makes (`token:<name>`, or `ui:token:<name>` in the web UI); null for any other actor. */
export function tokenNameOfActor(actor: string): string | null {
  const match = /^(?:ui:)?token:(.+)$/.exec(actor);
  return match?.[1] ?? null;
}

/** The actors a token's requests are recorded with: through the API, and in the UI logged in with it. */
export function actorsOfToken(name: string): string[] {
  return [tokenActor(name), uiActor(tokenActor(name))];
}

/** The refusal of a request to `profile` by a token bound to `profiles` (null: any); null when it may. */
export function profileRefusal(
  tokenName: string,
  profiles: readonly string[] | null,
  profile: string,
): AdmissionRefusedError | null {
  if (profiles === null || profiles.includes(profile)) return null;
  return new AdmissionRefusedError(
    'SCHEDFLOW_ERR_PROFILE_NOT_ALLOWED',
    `token "${tokenName}" may not use scheduler profile "${profile}"; it is bound to: ${profiles.join(', ') || 'none'}`,
    { allowed_profiles: [...profiles] },
  );
}

/**
 * Checks a new request of a token against its binding and quotas, as they are now (read here,
 * so `tokens update` counts from the next request). Call it in the transaction that records
 * the request, after {@link lockTokenQuotas} on PostgreSQL, before the request's row is
 * written: a throw undoes the transaction, and nothing of the request is recorded.
 */
export async function checkTokenAdmission(
  tx: History,
  request: { tokenName: string; profile: string; at: number },
): Promise<void> {
  const name = request.tokenName;
  const limits = await tokenLimitsByName(tx, name);
  // Revoked or deleted since its caller was let in: its requests stop here at the latest.
  if (!limits) return;
  const binding = profileRefusal(name, limits.profiles, request.profile);
  if (binding) throw binding;
  // Its requests for its owner as it is now: the (owner, …) indexes count them, and an owner
  // changed by `tokens update` starts afresh (docs/quotas.md).
  const owner = limits.owner;
  const actors = actorsOfToken(name);
  if (limits.maxInFlight !== null) {
    const inFlight = await inFlightCount(tx, { owner, actors });
    if (inFlight >= limits.maxInFlight) {
      throw new AdmissionRefusedError(
        'SCHEDFLOW_ERR_QUOTA_IN_FLIGHT',
        `token "${name}" has ${inFlight} requests not yet ended, its limit (--max-in-flight ${limits.maxInFlight}); retry once some have ended`,
        { limit: limits.maxInFlight },
        IN_FLIGHT_RETRY_AFTER_SEC,
      );
    }
  }
  if (limits.maxPerDay !== null) {
    const day = await acceptedSince(tx, { owner, actors, since: request.at - QUOTA_DAY_MS });
    if (day.count >= limits.maxPerDay) {
      // Room comes back when the oldest counted request leaves the window.
      const freedAt = (day.oldestAt ?? request.at) + QUOTA_DAY_MS;
      const retryAfterSec = Math.max(1, Math.ceil((freedAt - request.at) / 1000));
      throw new AdmissionRefusedError(
        'SCHEDFLOW_ERR_QUOTA_PER_DAY',
        `token "${name}" has had ${day.count} requests accepted in the last 24 hours, its limit (--max-per-day ${limits.maxPerDay}); retry in ${retryAfterSec} s`,
        { limit: limits.maxPerDay },
        retryAfterSec,
      );
    }
  }
}

/**
 * Refuses a token's action on a profile it is not bound to, before anything is done (a
 * pipeline run's trigger, whose steps go to the pipeline's profile): the `refused` audit row,
 * alone, then the refusal thrown. Nothing for any other caller, or a profile it may use.
 */
export async function refuseUnboundProfile(
  h: History,
  a: {
    token: { name: string; profiles: readonly string[] | null };
    profile: string;
    actor: string;
    owner: string;
    action: string;
    target: string;
    httpRequestId: string | null;
    at: number;
  },
): Promise<void> {
  const refusal = profileRefusal(a.token.name, a.token.profiles, a.profile);
  if (!refusal) return;
  await appendAudit(h, {
    at: a.at,
    actor: a.actor,
    owner: a.owner,
    action: a.action,
    target: a.target,
    outcome: 'refused',
    httpRequestId: a.httpRequestId,
    detail: `${refusal.code}: ${refusal.message}`,
  });
  throw refusal;
}
