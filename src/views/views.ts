import type { ProfileSyncRow } from '../db/accounting.js';
import {
  type AccountingJobRow,
  type JobRequestRow,
  type JobTransitionRow,
  type PipelineRunRow,
  type RequestReplayRow,
  type RequestState,
  type RunTransitionRow,
  type SummaryRow,
  TERMINAL_REQUEST_STATES,
  type WebhookDeliveryRow,
} from '../db/schema.js';
import type { JobOutcome, RunOutcome, StepOutcome } from '../db/webhook-payloads.js';
import { maskedSpec } from '../lib/secret-env.js';
import { pendingView } from './pending-view.js';
import type { PipelineSummary } from './pipeline-summary.js';
import { shownWebhookUrl } from './webhook-url-shown.js';

/**
 * The one description of a request, its transitions, a run, a summary and an
 * accounting record in the words users see (snake_case, ISO times, links):
 * the local API answers with these, the web UI shows them, and the webhook
 * bodies (src/notify/events.ts) are picked from them. Here, below both
 * src/http and src/notify, because notify must not import http; so this
 * module imports nothing above src/db (a type of the pipeline service aside).
 * The API's zod schemas (src/http/api/routes/*.schema.ts) describe the same
 * shapes for the OpenAPI document; its routes check these against them when
 * they compile, and serialize members in the schemas' order.
 */

export const API_PREFIX = '/api/v1';

export const iso = (ms: number): string => new Date(ms).toISOString();
export const isoOrNull = (ms: number | null | undefined): string | null =>
  ms === null || ms === undefined ? null : iso(ms);
const isoOfSec = (sec: number | null) => (sec === null ? null : iso(sec * 1000));
// The list requests/request-state.ts also reads: this module stays below the requests code.
const isTerminal = (state: RequestState): boolean => (TERMINAL_REQUEST_STATES as readonly string[]).includes(state);

/** Who a view is for: a webhook URL can hold credentials (user info, a query token), which only admins see. */
export interface Viewer {
  admin: boolean;
}

const webhookUrlFor = (url: string | null, viewer: Viewer): string | null =>
  url === null || viewer.admin ? url : shownWebhookUrl(url);

export const jobLink = (id: string) => `${API_PREFIX}/jobs/${encodeURIComponent(id)}`;
export const runLink = (id: string) => `${API_PREFIX}/runs/${encodeURIComponent(id)}`;

export function jobView(row: Omit<JobRequestRow, 'spec'>, viewer: Viewer) {
  const d = row.deadlines;
  return {
    id: row.id,
    name: row.name,
    profile: row.profile,
    state: row.state,
    origin: row.origin,
    owner: row.owner,
    actor: row.actor,
    job_id: row.jobId,
    adopted: row.adopted,
    raw_state: row.rawState,
    reason: row.reason,
    pending: pendingView(row),
    exit_code: row.exitCode,
    signal: row.signal,
    error: row.errorMessage === null ? null : { code: row.errorCode, message: row.errorMessage },
    created_at: iso(row.createdAt),
    updated_at: iso(row.updatedAt),
    submitted_at: isoOrNull(row.submittedAt),
    started_at: isoOrNull(row.startedAt),
    ended_at: isoOrNull(row.endedAt),
    run_id: row.runId,
    step: row.step,
    attempt: row.attempt,
    run_attempt: row.runId === null ? null : row.runAttempt,
    first_attempt_id: row.firstAttemptId,
    retry: retryView(row),
    held: row.heldAt === null ? null : { by: row.heldBy ?? 'unknown', at: iso(row.heldAt) },
    webhook_url: webhookUrlFor(row.webhookUrl, viewer),
    deadlines: d
      ? {
          max_pending: d.maxPendingSec ?? null,
          start_by: d.startBy === undefined ? null : iso(d.startBy),
          finish_by: d.finishBy === undefined ? null : iso(d.finishBy),
        }
      : null,
    links: { self: jobLink(row.id), ...(row.runId !== null && { run: runLink(row.runId) }) },
  };
}

/**
 * A job spec as shown (the API's job detail, the CLI's JSON): its secret-looking environment
 * values masked as the job's output view masks them (src/lib/secret-env.ts decides which).
 * The history keeps the spec as submitted, which retries and re-submissions send.
 */
export function specView(spec: unknown): Record<string, unknown> {
  return maskedSpec((spec ?? {}) as Record<string, unknown>);
}

/**
 * A run's resolved definition as shown: each step's spec as specView shows it, and its webhook
 * URL as the run's own `webhook_url` is shown to this viewer (credentials for admins only).
 */
export function runDefinitionView(definition: unknown, viewer: Viewer): unknown {
  if (definition === null || typeof definition !== 'object') return definition;
  const shown: Record<string, unknown> = { ...(definition as Record<string, unknown>) };
  if (typeof shown.webhookUrl === 'string') shown.webhookUrl = webhookUrlFor(shown.webhookUrl, viewer);
  const steps = shown.steps;
  if (!Array.isArray(steps)) return shown;
  return {
    ...shown,
    steps: steps.map((step: unknown) => {
      if (step === null || typeof step !== 'object' || !('spec' in step)) return step;
      const shownStep: Record<string, unknown> = { ...step, spec: specView(step.spec) };
      // A step made when the outputs it uses are known keeps its spec's template: masked alike.
      const deferred = (step as { deferred?: { template?: unknown } }).deferred;
      if (deferred?.template) shownStep.deferred = { ...deferred, template: specView(deferred.template) };
      return shownStep;
    }),
  };
}

/**
 * A request's retry policy at work: why this attempt was made (`cause`), and after its end
 * whether another follows (`next_attempt_id`, or `due_at` while its backoff runs) or why not
 * (`note`). Null for a request without a policy.
 */
export function retryView(row: Omit<JobRequestRow, 'spec'>) {
  if (row.retryPolicy === null && row.retryCause === null) return null;
  const c = row.retryCause;
  return {
    cause: c
      ? {
          previous_attempt_id: c.previousId,
          after: c.after,
          exit_code: c.exitCode,
          reason: c.reason,
          escalated: c.escalated.map((e) => ({
            field: e.field,
            from: e.from,
            to: e.to,
            capped_by: e.cappedBy ?? null,
          })),
        }
      : null,
    due_at: isoOrNull(row.retryDueAt),
    next_attempt_id: row.nextAttemptId,
    note: row.retryNote,
    limit: row.retryPolicy?.limit ?? null,
  };
}

/** One line of a request's attempts (`attempts` of its detail). */
export function attemptView(row: JobRequestRow) {
  return {
    id: row.id,
    attempt: row.attempt,
    state: row.state,
    job_id: row.jobId,
    exit_code: row.exitCode,
    reason: row.retryCause?.reason ?? null,
    created_at: iso(row.createdAt),
    ended_at: isoOrNull(row.endedAt),
    links: { self: jobLink(row.id) },
  };
}

/**
 * A webhook delivery of a request or run. How the receiver answered (its status, the first bytes
 * of an error answer, a connection's error code) is for admins only: any reader could otherwise
 * point a job's webhook at an address and learn what answers there (issue 30). Others see where
 * the delivery stands and how many attempts it took.
 */
export function deliveryView(d: WebhookDeliveryRow, viewer: Viewer) {
  return {
    event: d.event,
    state: d.state,
    attempts: d.attempts,
    last_status: viewer.admin ? d.lastStatus : null,
    last_error: viewer.admin ? d.lastError : null,
    created_at: iso(d.createdAt),
    delivered_at: isoOrNull(d.deliveredAt),
  };
}

export function transitionView(t: JobTransitionRow) {
  return {
    from: t.fromState,
    to: t.toState,
    at: iso(t.at),
    source: t.source,
    raw_state: t.rawState,
    reason: t.reason,
    stale: t.stale,
    detail: t.detail,
  };
}

export function runTransitionView(t: RunTransitionRow) {
  return { from: t.fromState, to: t.toState, at: iso(t.at), source: t.source, detail: t.detail };
}

export function deduplicatedView(r: RequestReplayRow) {
  return {
    token: r.tokenName,
    idempotency_key: r.key,
    count: r.count,
    first_at: iso(r.firstAt),
    last_at: iso(r.lastAt),
  };
}

/**
 * How current a request's state is. A finished request is final; a tracked
 * one is as fresh as its profile's last poll: stale when that poll failed, was
 * served from the proxy's cache past its lifetime (an outage), or is overdue
 * (more than twice the longest poll interval ago).
 */
export function freshnessView(
  row: JobRequestRow,
  sync: ProfileSyncRow | undefined,
  pollCeilingMs: number,
  now = Date.now(),
) {
  const sincePollMs = sync?.lastPollAt != null ? now - sync.lastPollAt : null;
  const profile = {
    last_poll_at: isoOrNull(sync?.lastPollAt ?? null),
    last_poll_ok: sync?.lastPollOk ?? null,
    last_poll_error: sync?.lastPollError ?? null,
    seconds_since_poll: sincePollMs === null ? null : Math.round(sincePollMs / 1000),
    answer_age_sec: sync?.lastPollAgeSec ?? null,
    answer_stale: sync?.lastPollStale ?? null,
  };
  const job = {
    last_seen_at: isoOrNull(row.lastSeenAt),
    last_seen_age_sec: row.lastSeenAgeSec,
    last_seen_stale: row.lastSeenStale,
  };
  const verdict = (stale: boolean, detail: string) => ({ stale, detail, profile, job });
  if (isTerminal(row.state)) return verdict(false, `final state (${row.state})`);
  if (row.jobId === null) return verdict(false, 'not submitted yet: the state is local');
  if (sincePollMs === null) return verdict(true, `profile ${row.profile} has not been polled yet`);
  // A stale poll is also a failed one (not ok): the cached answer's age says more than "failed".
  if (sync?.lastPollStale) {
    return verdict(
      true,
      `the scheduler is serving cached answers (${sync.lastPollAgeSec ?? '?'} s old): it may be unreachable`,
    );
  }
  if (sync?.lastPollOk === false) {
    return verdict(true, `the last poll of profile ${row.profile} failed: ${sync.lastPollError ?? 'no message'}`);
  }
  if (sincePollMs > 2 * pollCeilingMs) {
    return verdict(true, `profile ${row.profile} was last polled ${Math.round(sincePollMs / 1000)} s ago`);
  }
  return verdict(false, `as of the poll ${Math.round(sincePollMs / 1000)} s ago`);
}

function suggestionView(s: NonNullable<SummaryRow['suggestion']>) {
  return {
    changes: s.changes,
    previous: s.previous,
    why: s.why,
    step: s.step ?? null,
    request_id: s.requestId ?? null,
  };
}

/**
 * A summary as stored, in the API's names: what `schedflow jobs show` prints
 * and the `summary.ready` webhook carries. Its text and error were redacted
 * before they were stored; the prompt never was.
 */
export function summaryView(shown: { of: 'request' | 'run'; summary: SummaryRow } | null) {
  if (!shown) return null;
  const { summary: s } = shown;
  const f = s.findings;
  const trend = f?.trend ?? null;
  return {
    id: s.id,
    of: shown.of,
    request_id: s.requestId,
    run_id: s.runId,
    state: s.state,
    kind: s.kind,
    text: s.text,
    note: s.note,
    model: s.model,
    prompt_tokens: s.promptTokens,
    completion_tokens: s.completionTokens,
    latency_ms: s.latencyMs,
    attempts: s.attempts,
    error: s.error === null ? null : { code: s.errorCode, message: s.error },
    findings: f
      ? {
          efficiency: f.efficiency,
          triage: f.triage,
          steps: f.steps?.map(({ requestId, ...step }) => ({ ...step, request_id: requestId })) ?? null,
          trend: trend && {
            runs: trend.runs.map((r) => ({
              run_id: r.runId,
              state: r.state,
              duration_sec: r.durationSec,
              created_at: iso(r.createdAt),
            })),
            median_duration_sec: trend.medianDurationSec,
            comparison: trend.comparison,
            steps: trend.steps.map((t) => ({
              step: t.step,
              max_time_percent: t.maxTimePercent,
              resize: t.resize && suggestionView(t.resize),
            })),
          },
        }
      : null,
    suggestion: s.suggestion && suggestionView(s.suggestion),
    applied_request_id: s.appliedRequestId,
    applied_at: isoOrNull(s.appliedAt),
    created_at: iso(s.createdAt),
    updated_at: iso(s.updatedAt),
    completed_at: isoOrNull(s.completedAt),
    links: {
      // Only a request's own suggestion is applied through the API; a step's goes into its pipeline file.
      ...(shown.of === 'request' &&
        s.requestId !== null &&
        s.suggestion &&
        !s.suggestion.step &&
        s.appliedRequestId === null && { resubmit: `${jobLink(s.requestId)}/resubmit` }),
      ...(s.appliedRequestId !== null && { applied: jobLink(s.appliedRequestId) }),
    },
  };
}

export function runView(run: PipelineRunRow, viewer: Viewer) {
  return {
    id: run.id,
    pipeline: run.pipeline,
    trigger: run.trigger,
    triggered_by: run.triggeredBy,
    owner: run.owner,
    actor: run.actor,
    scheduled_for: isoOrNull(run.scheduledFor),
    upstream:
      run.upstreamRunId === null
        ? null
        : { run_id: run.upstreamRunId, attempt: run.upstreamAttempt ?? 1, links: { self: runLink(run.upstreamRunId) } },
    params: run.params,
    state: run.state,
    attempt: run.attempt,
    detail: run.detail,
    webhook_url: webhookUrlFor(run.webhookUrl, viewer),
    created_at: iso(run.createdAt),
    started_at: isoOrNull(run.startedAt),
    ended_at: isoOrNull(run.endedAt),
    updated_at: iso(run.updatedAt),
    cancel: run.cancelRequestedAt === null ? null : { requested_at: iso(run.cancelRequestedAt), by: run.cancelledBy },
    links: { self: runLink(run.id), jobs: `${API_PREFIX}/jobs?run_id=${encodeURIComponent(run.id)}` },
  };
}

export function pipelineView(p: PipelineSummary) {
  const name = encodeURIComponent(p.name);
  return {
    name: p.name,
    file: p.file,
    description: p.description,
    owner: p.owner,
    allow: p.allow,
    steps: p.steps,
    schedule: p.schedule,
    on: p.on,
    params: p.params,
    error: p.error,
    links: { runs: `${API_PREFIX}/runs?pipeline=${name}`, trigger: `${API_PREFIX}/pipelines/${name}/runs` },
  };
}

export function historyView({
  accounting: a,
  localState,
  taskId = null,
}: {
  accounting: AccountingJobRow;
  localState: RequestState | null;
  taskId?: number | null;
}) {
  return {
    profile: a.profile,
    job_id: a.jobId,
    name: a.name,
    account: a.account,
    user: a.user,
    partition: a.partition,
    external: a.requestId === null,
    accounting: {
      state: a.state,
      exit_code: a.exitCode,
      submit_time: isoOfSec(a.submitTime),
      start_time: isoOfSec(a.startTime),
      end_time: isoOfSec(a.endTime),
      elapsed_sec: a.elapsedSec,
      nodes: a.nodes,
      cpus: a.cpus,
      cpu_time_sec: a.cpuTimeSec,
    },
    local:
      a.requestId === null
        ? null
        : {
            request_id: a.requestId,
            state: localState,
            task_id: taskId,
            links: {
              self: jobLink(a.requestId),
              ...(taskId !== null && { output: `${jobLink(a.requestId)}/output?task=${taskId}` }),
            },
          },
  };
}

/** What a webhook receiver is shown: never a webhook URL, so the least a viewer sees. */
const RECEIVER: Viewer = { admin: false };

function pick<T extends object, K extends keyof T>(from: T, keys: readonly K[]): Pick<T, K> {
  return Object.fromEntries(keys.map((key) => [key, from[key]])) as Pick<T, K>;
}

/** A request's members in a `job.finished` body, in the order receivers have always had them. */
const JOB_OUTCOME_KEYS = [
  'id',
  'name',
  'profile',
  'state',
  'job_id',
  'exit_code',
  'signal',
  'reason',
  'raw_state',
  'submitted_at',
  'started_at',
  'ended_at',
  'run_id',
  'step',
  'attempt',
  'first_attempt_id',
  'retry',
] as const;

/** A request's outcome, as sent with `job.finished`: its view without what a receiver should not see. */
export function jobOutcome(row: JobRequestRow): JobOutcome {
  return pick(jobView(row, RECEIVER), JOB_OUTCOME_KEYS);
}

const RUN_OUTCOME_KEYS = [
  'id',
  'pipeline',
  'trigger',
  'state',
  'attempt',
  'detail',
  'scheduled_for',
  'created_at',
  'started_at',
  'ended_at',
] as const;

/**
 * A run's step outputs (issue 36), step → name → value, from each step's newest attempt that has
 * any: what later steps were given. A step whose outputs could not be read is left out (the
 * request that needed one says why).
 */
export function runOutputsView(steps: readonly JobRequestRow[]): Record<string, Record<string, string>> {
  const newest = new Map<string, JobRequestRow>();
  for (const row of steps) {
    if (row.step === null || row.outputs === null) continue;
    const seen = newest.get(row.step);
    if (!seen || row.attempt > seen.attempt) newest.set(row.step, row);
  }
  const out: Record<string, Record<string, string>> = {};
  for (const [step, row] of [...newest].sort(([a], [b]) => a.localeCompare(b))) {
    // By name: PostgreSQL's jsonb keeps an object's keys in an order of its own, not as written.
    const values = Object.entries(row.outputs?.values ?? {}).sort(([a], [b]) => a.localeCompare(b));
    if (values.length > 0) out[step] = Object.fromEntries(values);
  }
  return out;
}

/** A pipeline run's outcome, as sent with `run.finished`: its view, with every step request. */
export function runOutcome(run: PipelineRunRow, steps: readonly JobRequestRow[]): RunOutcome {
  return {
    ...pick(runView(run, RECEIVER), RUN_OUTCOME_KEYS),
    outputs: runOutputsView(steps),
    steps: steps.map((row): StepOutcome => {
      const s = jobView(row, RECEIVER);
      return {
        step: s.step,
        attempt: s.attempt,
        run_attempt: s.run_attempt,
        request_id: s.id,
        state: s.state,
        job_id: s.job_id,
        exit_code: s.exit_code,
      };
    }),
  };
}
