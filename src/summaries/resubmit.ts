import { randomUUID } from 'node:crypto';
import { appendAudit } from '../db/audit.js';
import type { History } from '../db/history.js';
import { getRequest, requestStateOf } from '../db/requests.js';
import type { JobRequestRow, SummaryRow, TransitionSource } from '../db/schema.js';
import { lockSummariesOfRequest, markSuggestionApplied, summaryOfRequest } from '../db/summaries.js';
import { NoSuggestionError, RequestNotFoundError, SchedflowError, SummaryPendingError } from '../errors.js';
import { systemClock } from '../lib/clock.js';
import { type AcceptDeps, enqueueAccepted, recordRequest } from '../requests/accept.js';
import { jobSpecSchema } from '../sched/job-spec.js';
import { describeSuggestion } from './prompt.js';

/**
 * Applying a summary's suggestion: one explicit action makes a new request
 * with the changed spec, linked to the one it re-submits. Nothing else ever
 * re-submits a job.
 */

/**
 * The request and the summary whose suggestion is to be applied; otherwise why not: the
 * request is missing (RequestNotFoundError), its summary is still being written
 * (SummaryPendingError), or there is nothing to apply (NoSuggestionError).
 */
export async function suggestionToApply(
  h: History,
  requestId: string,
): Promise<{ request: JobRequestRow; summary: SummaryRow }> {
  const request = await getRequest(h, requestId);
  if (!request) throw new RequestNotFoundError(`no job request ${requestId} in the history`);
  const summary = await summaryOfRequest(h, requestId);
  if (!summary) {
    throw new NoSuggestionError(
      request.runId
        ? `request ${requestId} is step "${request.step}" of a pipeline run; its run's summary holds the findings, and a change belongs in the pipeline file`
        : `request ${requestId} has no summary (summaries are off for it, or it has not ended)`,
    );
  }
  if (summary.state === 'pending' && !summary.suggestion) {
    throw new SummaryPendingError(`the summary of request ${requestId} is still being written; try again shortly`);
  }
  const suggestion = summary.suggestion;
  if (!suggestion) throw new NoSuggestionError(`the summary of request ${requestId} suggests no change to apply`);
  if (request.runId) {
    throw new NoSuggestionError(
      `request ${requestId} is step "${request.step}" of a pipeline run: change the pipeline file instead (suggested: ${describeSuggestion(suggestion)})`,
    );
  }
  return { request, summary };
}

/** The spec with the suggestion's changes, checked like a job file. */
export function changedSpec(request: JobRequestRow, summary: SummaryRow): Record<string, unknown> {
  const changes = summary.suggestion?.changes ?? {};
  const spec = { ...(request.spec as Record<string, unknown>), ...changes };
  const parsed = jobSpecSchema.safeParse(spec);
  if (!parsed.success) {
    throw new NoSuggestionError(
      `the suggested spec is not valid: ${parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; ')}`,
    );
  }
  return parsed.data;
}

/**
 * Records the new request (accepted) with the changed spec and its link, and
 * marks the suggestion applied, in one transaction. Applying twice returns
 * the first request. The caller queues its submission.
 */
export function applySuggestion(
  h: History,
  input: {
    requestId: string;
    newRequestId: string;
    at: number;
    /** Who applied it: the CLI (through its queued job) or the local API. @defaultValue 'cli' */
    origin?: 'api' | 'cli';
    /** Who asked (src/access/principal.ts); the new request is the original's owner's. */
    actor: string;
    /** The HTTP call that asked, for the audit log (src/db/audit.ts). */
    httpRequestId?: string | null;
  },
): Promise<{ requestId: string; created: boolean }> {
  const origin = input.origin ?? 'cli';
  const audit = {
    at: input.at,
    actor: input.actor,
    action: 'request.resubmit',
    target: `request:${input.requestId}`,
    httpRequestId: input.httpRequestId ?? null,
  };
  return h
    .transaction(async (tx) => {
      // The summary's row locked first (on PostgreSQL): of two applying it at once (the local API
      // and the CLI's job, on two hosts), the second waits for the first to commit and then reads
      // its mark, instead of also finding none and recording a second request.
      await lockSummariesOfRequest(tx, input.requestId);
      const { request, summary } = await suggestionToApply(tx, input.requestId);
      if (summary.appliedRequestId) {
        await appendAudit(tx, {
          ...audit,
          owner: request.owner,
          outcome: 'ok',
          detail: `applied before, as request ${summary.appliedRequestId}: nothing new made`,
        });
        return { requestId: summary.appliedRequestId, created: false };
      }
      const spec = changedSpec(request, summary);
      await recordRequest(tx, {
        id: input.newRequestId,
        profile: request.profile,
        name: request.name,
        spec,
        origin,
        owner: request.owner,
        actor: input.actor,
        at: input.at,
        source: origin,
        webhookUrl: request.webhookUrl,
        summarize: request.summarize,
        resubmitOf: request.id,
        // Left `accepted`: resubmitWithSuggestion queues it after this commit, and a call again
        // after a crash in between finds it so and queues it then.
        queued: null,
      });
      await markSuggestionApplied(tx, summary.id, input.newRequestId, input.at);
      // In the commit that makes the new request: a re-submission that rolls back leaves no row.
      await appendAudit(tx, {
        ...audit,
        owner: request.owner,
        outcome: 'ok',
        detail: `as request ${input.newRequestId}: ${describeChanges(summary)}`,
      });
      return { requestId: input.newRequestId, created: true };
    })
    .catch(async (error: unknown) => {
      // Refused (no such request, nothing to apply, a summary being written): nothing was made.
      if (error instanceof SchedflowError) {
        const owner = (await getRequest(h, input.requestId))?.owner ?? null;
        await appendAudit(h, { ...audit, owner, outcome: 'refused', detail: error.message });
      }
      throw error;
    });
}

/** The suggestion's changes, in a few words for the audit row (`mem=8G, time=2h`). */
function describeChanges(summary: SummaryRow): string {
  const said = Object.entries(summary.suggestion?.changes ?? {}).map(([key, value]) => `${key}=${String(value)}`);
  return said.length > 0 ? said.join(', ') : 'the suggested change';
}

/** A re-submission with a summary's suggested change: of which request, under which new id, asked by whom. */
export interface ResubmitInput {
  requestId: string;
  /** The new request's id (the local API's Idempotency-Key). @defaultValue a new UUID */
  newRequestId?: string;
  origin: 'api' | 'cli';
  /** Who asks (src/access/principal.ts); the new request is the original's owner's. */
  actor: string;
  /** The HTTP call that asked, for the audit log (src/db/audit.ts). */
  httpRequestId?: string | null;
}

/**
 * Applies a request's suggestion and queues the new request's submission: the local API's
 * `resubmit` and the CLI's apply-suggestion job. Applying twice returns the first request's id.
 */
export async function resubmitWithSuggestion(
  deps: AcceptDeps,
  input: ResubmitInput & {
    /** Who queues it: the local API, or the summarize worker running the CLI's job. */
    queuedBy: TransitionSource;
  },
): Promise<{ requestId: string; created: boolean }> {
  const made = await applySuggestion(deps.store, {
    requestId: input.requestId,
    newRequestId: input.newRequestId ?? randomUUID(),
    at: (deps.clock ?? systemClock).now(),
    origin: input.origin,
    actor: input.actor,
    httpRequestId: input.httpRequestId ?? null,
  });
  // Also when an earlier call recorded the request but did not get to queue it (its state alone:
  // the row's spec is not needed).
  if (made.created || (await requestStateOf(deps.store, made.requestId)) === 'accepted') {
    await enqueueAccepted(deps, made.requestId, input.queuedBy);
  }
  return made;
}
