import type { FastifyRequest } from 'fastify';
import { mayUsePipeline } from '../../../access/visibility.js';
import type { PipelineSummary } from '../../../pipelines/pipeline-service.js';
import { runAccessOf } from '../../api/access.js';
import type { UiContext } from '../context.js';
import { queryField } from '../context.js';
import { type Html, html } from '../html.js';
import { principalOfLogin, type UiSession } from '../sessions.js';

/** Messages after an action, by code: the query string never carries text onto the page. */
const FLASH: Record<string, { text: string; error?: boolean }> = {
  'cancel-cancelled': { text: 'Cancelled before it was submitted.' },
  'cancel-requested': { text: 'Cancel sent to the scheduler; the next poll records it.' },
  'cancel-submitting': { text: 'A submission is under way: try the cancel again in a few seconds.', error: true },
  'cancel-ended': { text: 'It had already ended.' },
  'cancel-not_found': { text: 'No such request.', error: true },
  'cancel-error': { text: 'The scheduler did not accept the cancel; the daemon log says why.', error: true },
  'run-cancelled': { text: 'Run cancelled.' },
  'run-cancelling': {
    text: 'Cancel under way: steps not submitted are withdrawn, submitted ones cancelled; the run ends cancelled once they have ended.',
  },
  'run-ended': { text: 'The run had already ended.', error: true },
  'run-not_found': { text: 'No such run.', error: true },
  'run-cancel-error': { text: 'The cancel did not go through; the daemon log says why.', error: true },
  'run-resumed': { text: 'Resumed: a new attempt runs the steps that did not complete; completed steps are kept.' },
  'run-resume-refused': {
    text: 'Not resumed: only a run that failed or was cancelled can be (it may have been resumed just now), and only while the history holds its steps.',
    error: true,
  },
  'run-resume-error': { text: 'The resume did not go through; the daemon log says why.', error: true },
  // Hold, release and update (routes/job-control.ts); Slurm's refusals are shown on a page of their own.
  'hold-done': { text: 'Held: it does not start until released.' },
  'release-done': { text: 'Released.' },
  'update-done': { text: 'Updated.' },
  'control-unchanged': { text: 'Nothing to change (already held, or not held).' },
  'control-submitting': { text: 'A submission is under way: try again in a few seconds.', error: true },
  'control-ended': { text: 'It had already ended.', error: true },
  'control-not_found': { text: 'No such request.', error: true },
  'run-hold-done': { text: 'Run held: its steps not running wait until released (the steps table says each).' },
  'run-release-done': { text: 'Run released.' },
  retried: { text: 'Retried: this is the new request, with the same spec.' },
  'tasks-retried': { text: "Retried: this is the new request, for the array's tasks that did not complete." },
  'tasks-retry-not': { text: 'No task of this array job failed: nothing to retry.', error: true },
  'retry-not': { text: 'Only a request that ended without completing can be retried.', error: true },
  'retry-refused': {
    text: "Not retried: this profile's submissions are refused at the door (its token lacks a scope, or the job names another account than the token's); the Profiles page says which.",
    error: true,
  },
  triggered: { text: 'Run started.' },
  paused: { text: 'Queue paused: its workers take no new jobs until resumed.' },
  resumed: { text: 'Queue resumed.' },
  'schedule-paused': { text: 'Schedule paused: its ticks make no runs until it is resumed.' },
  'schedule-resumed': { text: 'Schedule resumed: its next tick makes a run.' },
  'schedule-resumed-off': {
    text: 'Pause lifted, but the file keeps the schedule off (schedule.enabled: false).',
    error: true,
  },
};

export function flashOf(request: FastifyRequest): { text: string; error?: boolean } | null {
  const code = queryField(request, 'done');
  return code ? (FLASH[code] ?? null) : null;
}

export function selectField(
  name: string,
  label: string,
  options: readonly string[],
  selected: string | undefined,
): Html {
  return html`<label>${label}<select name="${name}">${options.map(
    (o) => html`<option value="${o}"${o === (selected ?? '') ? html` selected` : ''}>${o === '' ? 'any' : o}</option>`,
  )}</select></label>`;
}

export function textField(name: string, label: string, value: string | undefined, type = 'text'): Html {
  return html`<label>${label}<input type="${type}" name="${name}" value="${value ?? ''}"></label>`;
}

/** The pipelines the user may read (or change): another owner's are not named at all. */
export async function visiblePipelines(
  ctx: UiContext,
  session: UiSession,
  use: 'read' | 'change',
): Promise<PipelineSummary[]> {
  const principal = principalOfLogin(session);
  return ((await ctx.deps.pipelines?.list()) ?? []).filter((p) => mayUsePipeline(principal, p, use));
}

/** The runs the user may read or cancel, as src/db/runs.ts filters them (the API's rule). */
export function runAccessOfSession(ctx: UiContext, session: UiSession, use: 'read' | 'change') {
  return runAccessOf(ctx.deps, principalOfLogin(session), use);
}

export async function pipelineOptions(ctx: UiContext, session: UiSession): Promise<string[]> {
  return (await visiblePipelines(ctx, session, 'read')).map((p) => p.name);
}

/** `from`/`to` days (YYYY-MM-DD, UTC) as a half-open range of milliseconds; `to` is included. */
export function dayRange(from: string | undefined, to: string | undefined): { sinceMs?: number; untilMs?: number } {
  const day = (text: string | undefined): number | undefined => {
    if (!text || !/^\d{4}-\d{2}-\d{2}$/.test(text)) return undefined;
    const ms = Date.parse(`${text}T00:00:00Z`);
    return Number.isFinite(ms) ? ms : undefined;
  };
  const since = day(from);
  const until = day(to);
  return { sinceMs: since, untilMs: until === undefined ? undefined : until + 86_400_000 };
}
