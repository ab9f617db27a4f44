import type { FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { changeOwner } from '../../../access/visibility.js';
import { getRequest } from '../../../db/requests.js';
import type { JobRequestRow, PipelineRunRow } from '../../../db/schema.js';
import { JobControlRefusedError, SchedflowError, toError } from '../../../errors.js';
import { controlRun } from '../../../pipelines/run-hold.js';
import { type ControlAction, type ControlDeps, controlRequest, type JobChange } from '../../../requests/job-control.js';
import { isTerminalRequest } from '../../../requests/request-state.js';
import { parseTimeLimit } from '../../../sched/job-spec.js';
import { uiAuditContext } from '../../audit-context.js';
import { field, sendPage, sessionOf, type UiContext } from '../context.js';
import { type Html, html } from '../html.js';
import { actionButton, page, UI_PREFIX } from '../layout.js';
import { principalOfLogin, type UiSession } from '../sessions.js';
import { lacksScope, mayUiAct, mayUiChange } from '../ui-access.js';
import { runAccessOfSession } from './common.js';

/**
 * The web UI's Hold, Release and Update of a job, Hold and Release of a run: the API's rules
 * (scope `control`, the owner's own or an admin's, src/requests/job-control.ts behind both), with
 * the session's CSRF token as every form of these pages. What Slurm refuses is shown on the page
 * in its own words (never put in a URL: the flash codes of common.ts carry no text).
 */

const jobHref = (id: string): string => `${UI_PREFIX}/jobs/${encodeURIComponent(id)}`;
const runHref = (id: string): string => `${UI_PREFIX}/runs/${encodeURIComponent(id)}`;

/** States a job can be held or updated in, as far as the page can tell: not running, not ended. */
const holdable = (row: JobRequestRow): boolean =>
  !isTerminalRequest(row.state) && row.state !== 'running' && row.state !== 'submitting';

/** The job page's Hold / Release / Update controls, for who may use them (scope `control`, the owner's). */
export function jobControls(session: UiSession, row: JobRequestRow): Html[] {
  if (!mayUiChange(session, 'control', row.owner) || isTerminalRequest(row.state)) return [];
  const controls: Html[] = [];
  if (row.heldAt !== null) {
    controls.push(actionButton(session, `${jobHref(row.id)}/release`, 'Release job'));
  } else if (holdable(row)) {
    controls.push(
      actionButton(session, `${jobHref(row.id)}/hold`, 'Hold job', {
        confirm: `Hold ${row.name}? It does not start until released.`,
      }),
    );
  }
  const spec = row.spec as { time_limit?: unknown };
  controls.push(html`<form class="inline" method="post" action="${jobHref(row.id)}/update" aria-label="update job">
<input type="hidden" name="_csrf" value="${session.csrfToken}">
<label>Time limit <input name="time_limit" size="10" placeholder="${spec.time_limit === undefined ? 'e.g. 1:30:00' : String(spec.time_limit)}" aria-label="new time limit"></label>
<label>Name <input name="name" size="14" placeholder="${row.name}" aria-label="new name"></label>
<button type="submit">Update job</button></form>`);
  return controls;
}

/** The run page's Hold / Release buttons, for who may change the run (scope `control`). */
export function runControls(session: UiSession, run: PipelineRunRow, mayChangeRun: boolean): Html[] {
  if (!mayChangeRun || !mayUiAct(session, 'control')) return [];
  if (run.state !== 'running' && run.state !== 'queued') return [];
  return [
    actionButton(session, `${runHref(run.id)}/hold`, 'Hold run', {
      confirm: `Hold this run of ${run.pipeline}? Its steps not running wait until released.`,
    }),
    actionButton(session, `${runHref(run.id)}/release`, 'Release run'),
  ];
}

export async function jobControlPages(app: FastifyInstance, { ctx }: { ctx: UiContext }): Promise<void> {
  const { store } = ctx.deps;
  const deps: ControlDeps = { store, clients: ctx.deps.clients, logger: ctx.deps.logger };

  /** A refusal in Slurm's words (or the change's own mistake) on a page of its own, with its status. */
  const refused = (reply: FastifyReply, session: UiSession, back: string, status: number, text: string) =>
    sendPage(
      reply,
      page({
        title: 'Not done',
        nav: 'jobs',
        session,
        flash: { text, error: true },
        body: html`<h1>Not done</h1><p><a href="${back}">Back</a></p>`,
      }),
      status,
    );

  const act = async (
    request: FastifyRequest<{ Params: { id: string } }>,
    reply: FastifyReply,
    kind: ControlAction['kind'],
  ) => {
    const session = sessionOf(request);
    if (!mayUiAct(session, 'control')) return reply.code(403).type('text/plain').send(lacksScope('control', kind));
    const id = request.params.id;
    // Another owner's request reads as one that does not exist.
    if (!(await getRequest(store, id, { owner: changeOwner(principalOfLogin(session)) }))) {
      return reply.redirect(`${jobHref(id)}?done=control-not_found`, 303);
    }
    let action: ControlAction;
    if (kind === 'update') {
      const change = changeOf(request.body);
      if (typeof change === 'string') return refused(reply, session, jobHref(id), 400, change);
      action = { kind, change };
    } else {
      action = { kind };
    }
    try {
      const outcome = await controlRequest(deps, id, action, {
        source: 'api',
        actor: session.actor,
        audit: uiAuditContext(request, session),
      });
      const done =
        outcome.kind === 'done'
          ? `${kind}-done`
          : outcome.kind === 'unchanged'
            ? 'control-unchanged'
            : `control-${outcome.kind}`;
      return reply.redirect(`${jobHref(id)}?done=${done}`, 303);
    } catch (error) {
      if (error instanceof JobControlRefusedError) {
        return refused(
          reply,
          session,
          jobHref(id),
          error.code === 'SCHEDFLOW_ERR_JOB_CONTROL_REFUSED' ? 409 : 422,
          error.message,
        );
      }
      ctx.deps.logger.warn({ requestId: id, err: toError(error) }, `UI ${kind} failed`);
      // The scheduler did not answer, or refused otherwise: its sentence names no secret.
      const text = error instanceof SchedflowError ? error.message : 'the daemon log says why';
      return refused(reply, session, jobHref(id), 502, `Not done: ${text}`);
    }
  };

  for (const kind of ['hold', 'release', 'update'] as const) {
    app.post<{ Params: { id: string } }>(`${UI_PREFIX}/jobs/:id/${kind}`, (request, reply) =>
      act(request, reply, kind),
    );
  }

  for (const kind of ['hold', 'release'] as const) {
    app.post<{ Params: { id: string } }>(`${UI_PREFIX}/runs/:id/${kind}`, async (request, reply) => {
      const session = sessionOf(request);
      if (!mayUiAct(session, 'control')) return reply.code(403).type('text/plain').send(lacksScope('control', kind));
      const id = request.params.id;
      const outcome = await controlRun(
        deps,
        id,
        kind,
        { source: 'api', actor: session.actor, audit: uiAuditContext(request, session) },
        await runAccessOfSession(ctx, session, 'change'),
      );
      const done =
        outcome.kind === 'done' ? `run-${kind}-done` : outcome.kind === 'ended' ? 'run-ended' : 'run-not_found';
      return reply.redirect(`${runHref(id)}?done=${done}`, 303);
    });
  }
}

/** The update form's fields as a change, or what is wrong with them (said on the page). */
function changeOf(body: unknown): JobChange | string {
  const change: JobChange = {};
  const limit = field(body, 'time_limit')?.trim();
  if (limit) {
    try {
      parseTimeLimit(limit);
    } catch (error) {
      return `Time limit: ${toError(error).message}`;
    }
    change.time_limit = /^\d+$/.test(limit) ? Number(limit) : limit;
  }
  const name = field(body, 'name')?.trim();
  if (name) change.name = name;
  if (Object.keys(change).length === 0) return 'Nothing to change: give a time limit or a name.';
  return change;
}
