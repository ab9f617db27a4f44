import cronstrue from 'cronstrue';
import type { FastifyInstance } from 'fastify';
import { mayUsePipeline } from '../../../access/visibility.js';
import { missesOfRun } from '../../../db/deadline-misses.js';
import { getRun, runsPage, runTransitionsOf, stepRequests } from '../../../db/runs.js';
import { type JobRequestRow, type PipelineRunRow, RUN_STATES, type RunState } from '../../../db/schema.js';
import { summaryOfRun } from '../../../db/summaries.js';
import { ConfigError, RunNotResumableError, SubmissionRefusedError } from '../../../errors.js';
import type { PipelineSummary } from '../../../pipelines/pipeline-service.js';
import type { RunPlan } from '../../../pipelines/run-plan.js';
import { runStartedBy } from '../../../views/run-start.js';
import { runOutputsView, runView } from '../../../views/views.js';
import { uiAuditContext } from '../../audit-context.js';
import { field, queryField, sendPage, sessionOf, type UiContext } from '../context.js';
import { type DagNode, dagSvg } from '../dag.js';
import { duration, type Html, html, stateBadge, time } from '../html.js';
import { actionButton, page, UI_PREFIX } from '../layout.js';
import { isAdmin, principalOfLogin, type UiSession } from '../sessions.js';
import { lacksScope, mayUiAct } from '../ui-access.js';
import { flashOf, pipelineOptions, runAccessOfSession, selectField, visiblePipelines } from './common.js';
import { runControls } from './job-control.js';
import { jobHref, jobTable } from './jobs.js';

export const runHref = (id: string): string => `${UI_PREFIX}/runs/${encodeURIComponent(id)}`;
const pipelineHref = (name: string): string => `${UI_PREFIX}/pipelines/${encodeURIComponent(name)}`;

export async function pipelinePages(app: FastifyInstance, { ctx }: { ctx: UiContext }): Promise<void> {
  const h = ctx.deps.store;

  app.get(`${UI_PREFIX}/pipelines`, async (request, reply) => {
    const session = sessionOf(request);
    const pipelines = await visiblePipelines(ctx, session, 'read');
    const access = await runAccessOfSession(ctx, session, 'read');
    const lastRuns = await Promise.all(
      pipelines.map(async (p) => (await runsPage(h, { pipeline: p.name, access, limit: 5 })).slice(0, 5)),
    );
    const body = html`<h1>Pipelines</h1>
<p class="muted">On a pipeline's page its owner (and the owners its <code>allow:</code> names), with the submit scope, or an admin can trigger it now, and pause or resume its schedule. A file with <code>schedule.enabled: false</code> keeps its schedule off whatever is done here: the file wins for off.</p>
${
  pipelines.length === 0
    ? html`<p class="muted">No pipeline files are loaded.</p>`
    : html`<div class="table-wrap"><table class="responsive"><thead><tr><th>Pipeline</th><th>Schedule</th><th>Next runs</th><th>Last runs</th></tr></thead><tbody>${pipelines.map(
        (p, i) => {
          const last = lastRuns[i] ?? [];
          return html`<tr><td data-label="Pipeline"><a href="${pipelineHref(p.name)}">${p.name}</a>${
            p.error ? html`<br><span class="stale">file error: ${p.error}</span>` : ''
          }</td><td data-label="Schedule">${scheduleText(p)}</td><td data-label="Next runs">${
            p.schedule?.next.length
              ? p.schedule.next.slice(0, 3).map((t) => html`${time(Date.parse(t))}<br>`)
              : html`<span class="muted">—</span>`
          }</td><td data-label="Last runs">${
            last.length
              ? last.map((r) => html`<a href="${runHref(r.id)}">${stateBadge(r.state, { liveId: r.id })}</a> `)
              : '—'
          }</td></tr>`;
        },
      )}</tbody></table></div>`
}`;
    return sendPage(reply, page({ title: 'Pipelines', nav: 'pipelines', session, body, live: 'all' }));
  });

  app.get<{ Params: { name: string } }>(`${UI_PREFIX}/pipelines/:name`, async (request, reply) => {
    const session = sessionOf(request);
    // Another owner's pipeline is as unknown as one that does not exist.
    const p = (await visiblePipelines(ctx, session, 'read')).find((q) => q.name === request.params.name);
    if (!p) {
      return sendPage(
        reply,
        page({ title: 'Not found', nav: 'pipelines', session, body: html`<h1>No such pipeline</h1>` }),
        404,
      );
    }
    const access = await runAccessOfSession(ctx, session, 'read');
    const runs = (await runsPage(h, { pipeline: p.name, access, limit: 20 })).slice(0, 20);
    const mayChange = mayUiAct(session, 'submit') && mayUsePipeline(principalOfLogin(session), p, 'change');
    const body = html`<h1>Pipeline ${p.name}</h1>
${p.description ? html`<p>${p.description}</p>` : ''}
<div class="panel"><dl class="facts">
<dt>Owner</dt><dd>${p.owner}${p.allow.length ? html` <span class="muted">(also: ${p.allow.join(', ')})</span>` : ''}</dd>
<dt>File</dt><dd><code>${p.file}</code>${p.error ? html`<br><span class="stale">${p.error}</span>` : ''}</dd>
<dt>Schedule</dt><dd>${scheduleText(p)}</dd>
${
  p.on.length
    ? html`<dt>Started by runs of</dt><dd>${p.on.map((o) => html`<a href="${pipelineHref(o.pipeline)}">${o.pipeline}</a> <span class="muted">(${o.end === 'finished' ? 'any end' : o.end})</span><br>`)}</dd>`
    : ''
}
${
  p.schedule
    ? html`<dt>Overlap / catch-up</dt><dd>${p.schedule.overlap} / ${p.schedule.catchup}</dd>
<dt>State</dt><dd>${scheduleState(p.schedule)}</dd>
<dt>Next runs</dt><dd>${p.schedule.next.length ? p.schedule.next.map((t) => html`${time(Date.parse(t))}<br>`) : `none: the schedule is ${p.schedule.paused ? 'paused' : 'off'}`}</dd>`
    : ''
}
<dt>Steps</dt><dd>${p.steps.map((s) => s.name).join(', ')}</dd></dl>
${p.schedule ? scheduleControls(session, p.name, p.schedule, mayChange) : ''}</div>
${dagSvg(
  p.steps.map((s) => ({
    name: s.name,
    needs: s.needs.map((n) => ({ step: n, type: 'afterok' })),
    state: 'not started',
    href: null,
    liveId: null,
  })),
  'steps of the pipeline and their dependencies',
)}
${mayChange ? triggerForm(session, p) : ''}
<h2>Runs</h2>${runTable(runs)}`;
    return sendPage(
      reply,
      page({ title: `Pipeline ${p.name}`, nav: 'pipelines', session, body, live: 'all', flash: flashOf(request) }),
    );
  });

  app.post<{ Params: { name: string } }>(`${UI_PREFIX}/pipelines/:name/trigger`, async (request, reply) => {
    const session = sessionOf(request);
    if (!mayUiAct(session, 'submit')) return reply.code(403).type('text/plain').send(lacksScope('submit', 'trigger'));
    const pipelines = ctx.deps.pipelines;
    // Another owner's pipeline is as unknown as one that does not exist.
    const p = (await visiblePipelines(ctx, session, 'change')).find((q) => q.name === request.params.name);
    if (!pipelines || !p) return reply.code(404).type('text/plain').send('no such pipeline');
    const params: Record<string, string> = {};
    for (const name of Object.keys(p.params)) {
      const value = field(request.body, `param.${name}`);
      if (value !== undefined && value !== '') params[name] = value;
    }
    try {
      const run = await pipelines.trigger(p.name, {
        trigger: 'ui',
        triggeredBy: `web UI (${session.who})`,
        actor: session.actor,
        httpRequestId: request.id,
        params,
      });
      ctx.deps.logger.info({ pipeline: p.name, runId: run.id, by: session.who }, 'pipeline triggered from the web UI');
      return reply.redirect(`${runHref(run.id)}?done=triggered`, 303);
    } catch (error) {
      if (error instanceof ConfigError || error instanceof SubmissionRefusedError) {
        return sendPage(
          reply,
          page({
            title: `Pipeline ${p.name}`,
            nav: 'pipelines',
            session,
            body: html`<h1>Pipeline ${p.name}</h1>${triggerForm(session, p, params)}`,
            flash: { text: error.message, error: true },
          }),
          400,
        );
      }
      throw error;
    }
  });

  // Pausing a paused schedule (or resuming a running one) changes nothing: a second click is harmless.
  for (const action of ['pause', 'resume'] as const) {
    app.post<{ Params: { name: string } }>(`${UI_PREFIX}/pipelines/:name/${action}`, async (request, reply) => {
      const session = sessionOf(request);
      if (!mayUiAct(session, 'submit')) {
        return reply.code(403).type('text/plain').send(lacksScope('submit', 'pause or resume a schedule'));
      }
      const pipelines = ctx.deps.pipelines;
      // Another owner's pipeline is as unknown as one that does not exist.
      const p = (await visiblePipelines(ctx, session, 'change')).find((q) => q.name === request.params.name);
      if (!pipelines || !p) return reply.code(404).type('text/plain').send('no such pipeline');
      if (!p.schedule) return reply.code(409).type('text/plain').send('this pipeline has no schedule to pause');
      // The registry logs who did it; `session.who` is what the page shows afterwards.
      const after =
        action === 'pause'
          ? await pipelines.pause(p.name, session.who, uiAuditContext(request, session))
          : await pipelines.resume(p.name, session.who, uiAuditContext(request, session));
      const done =
        action === 'pause' ? 'schedule-paused' : after.schedule?.enabled ? 'schedule-resumed' : 'schedule-resumed-off';
      return reply.redirect(`${pipelineHref(p.name)}?done=${done}`, 303);
    });
  }

  app.get(`${UI_PREFIX}/runs`, async (request, reply) => {
    const session = sessionOf(request);
    const pipeline = queryField(request, 'pipeline');
    const state = queryField(request, 'state');
    const runs = (
      await runsPage(h, {
        pipeline,
        states: state && (RUN_STATES as readonly string[]).includes(state) ? [state as RunState] : undefined,
        access: await runAccessOfSession(ctx, session, 'read'),
        limit: 100,
      })
    ).slice(0, 100);
    const body = html`<h1>Runs</h1>
<form class="filters" method="get" action="${UI_PREFIX}/runs" aria-label="filter runs">
${selectField('pipeline', 'Pipeline', ['', ...(await pipelineOptions(ctx, session))], pipeline)}
${selectField('state', 'State', ['', ...RUN_STATES], state)}
<button type="submit">Filter</button></form>${runTable(runs)}`;
    return sendPage(reply, page({ title: 'Runs', nav: 'runs', session, body, live: 'all' }));
  });

  app.post<{ Params: { id: string } }>(`${UI_PREFIX}/runs/:id/cancel`, async (request, reply) => {
    const session = sessionOf(request);
    if (!mayUiAct(session, 'cancel')) return reply.code(403).type('text/plain').send(lacksScope('cancel', 'cancel'));
    const pipelines = ctx.deps.pipelines;
    if (!pipelines) return reply.code(503).type('text/plain').send('pipelines not loaded yet; try again shortly');
    const id = request.params.id;
    // A run the user may not cancel reads as one that does not exist.
    if (!(await getRun(h, id, await runAccessOfSession(ctx, session, 'change')))) {
      return reply.redirect(`${runHref(id)}?done=run-not_found`, 303);
    }
    let done: string;
    try {
      const outcome = await pipelines.cancelRun(id, {
        source: 'api',
        who: `web UI (${session.who})`,
        audit: uiAuditContext(request, session),
      });
      done = `run-${outcome.kind}`;
    } catch (error) {
      ctx.deps.logger.warn({ runId: id, err: error }, 'UI run cancel failed');
      done = 'run-cancel-error';
    }
    return reply.redirect(`${runHref(id)}?done=${done}`, 303);
  });

  // Resuming: a new attempt of a failed or cancelled run (src/pipelines/run-resume.ts). Scope as
  // for triggering a run; a second click finds the run running and is refused, changing nothing.
  app.post<{ Params: { id: string } }>(`${UI_PREFIX}/runs/:id/resume`, async (request, reply) => {
    const session = sessionOf(request);
    if (!mayUiAct(session, 'submit')) return reply.code(403).type('text/plain').send(lacksScope('submit', 'resume'));
    const pipelines = ctx.deps.pipelines;
    if (!pipelines) return reply.code(503).type('text/plain').send('pipelines not loaded yet; try again shortly');
    const id = request.params.id;
    // A run the user may not change reads as one that does not exist.
    if (!(await getRun(h, id, await runAccessOfSession(ctx, session, 'change')))) {
      return reply.redirect(`${runHref(id)}?done=run-not_found`, 303);
    }
    let done: string;
    try {
      const outcome = await pipelines.resumeRun(id, {
        source: 'ui',
        who: `web UI (${session.who})`,
        audit: uiAuditContext(request, session),
      });
      done = outcome.kind === 'resumed' ? 'run-resumed' : 'run-not_found';
    } catch (error) {
      if (error instanceof RunNotResumableError || error instanceof ConfigError) {
        done = 'run-resume-refused';
      } else {
        ctx.deps.logger.warn({ runId: id, err: error }, 'UI run resume failed');
        done = 'run-resume-error';
      }
    }
    return reply.redirect(`${runHref(id)}?done=${done}`, 303);
  });

  app.get<{ Params: { id: string } }>(`${UI_PREFIX}/runs/:id`, async (request, reply) => {
    const session = sessionOf(request);
    // Another owner's run is as unknown as one that does not exist.
    const run = await getRun(h, request.params.id, await runAccessOfSession(ctx, session, 'read'));
    if (!run) {
      return sendPage(reply, page({ title: 'Not found', nav: 'runs', session, body: html`<h1>No such run</h1>` }), 404);
    }
    // Asked together, not one after another: on PostgreSQL they run side by side, and on SQLite
    // close together (no write in between, mostly), as the synchronous reads did.
    const [steps, misses, summary, transitions] = await Promise.all([
      stepRequests(h, run.id),
      missesOfRun(h, run.id),
      summaryOfRun(h, run.id),
      runTransitionsOf(h, run.id),
    ]);
    // The latest attempt of each step is what the graph shows.
    const latest = new Map<string, (typeof steps)[number]>();
    for (const s of steps) {
      const known = s.step ? latest.get(s.step) : undefined;
      if (s.step && (!known || s.attempt > known.attempt)) latest.set(s.step, s);
    }
    const plan = run.definition as RunPlan;
    const nodes: DagNode[] = plan.steps.map((s) => {
      const req = latest.get(s.step);
      return {
        name: s.step,
        needs: s.needs,
        state:
          req?.state ??
          (run.state === 'running' || run.state === 'queued'
            ? s.deferred
              ? 'waiting for outputs'
              : 'not started'
            : 'skipped'),
        href: req ? jobHref(req.id) : null,
        liveId: req?.id ?? null,
      };
    });
    // The run as the API and the webhooks describe it (src/views/).
    const v = runView(run, { admin: isAdmin(session) });
    const mayChangeRun = (await getRun(h, run.id, await runAccessOfSession(ctx, session, 'change'))) !== undefined;
    const body = html`<h1 data-watch="${run.id}">Run of <a href="${pipelineHref(run.pipeline)}">${run.pipeline}</a></h1>
<div class="panel"><dl class="facts">
<dt>State</dt><dd>${stateBadge(v.state, { liveId: v.id })}${v.detail ? html` <span class="muted">${v.detail}</span>` : ''}</dd>
<dt>Owner</dt><dd>${v.owner}</dd>
<dt>Started by</dt><dd>${runStartedBy(run)}${v.scheduled_for ? html` for ${time(v.scheduled_for)}` : ''}${
      v.upstream ? html` <a href="${runHref(v.upstream.run_id)}">upstream run</a>` : ''
    }</dd>
<dt>Parameters</dt><dd>${Object.entries(v.params).map(([k, value]) => html`<code>${k}=${value}</code> `)}</dd>
<dt>Created</dt><dd>${time(v.created_at)}</dd>
<dt>Started</dt><dd>${time(v.started_at)}</dd>
<dt>Ended</dt><dd>${time(v.ended_at)}</dd>
${v.attempt > 1 ? html`<dt>Attempt</dt><dd>${v.attempt} <span class="muted">(resumed ${v.attempt - 1} time${v.attempt > 2 ? 's' : ''})</span></dd>` : ''}
${v.cancel ? html`<dt>Cancel</dt><dd>asked ${time(v.cancel.requested_at)}${v.cancel.by ? ` by ${v.cancel.by}` : ''}</dd>` : ''}
<dt>Run id</dt><dd><code>${v.id}</code></dd></dl>${
      mayUiAct(session, 'cancel') && mayChangeRun && (run.state === 'running' || run.state === 'queued')
        ? html`<p>${actionButton(session, `${runHref(run.id)}/cancel`, 'Cancel run', {
            danger: true,
            confirm: `Cancel this run of ${run.pipeline}? Steps not ended are cancelled, and none is retried.`,
          })}</p>`
        : ''
    }${
      mayUiAct(session, 'submit') && mayChangeRun && (run.state === 'failed' || run.state === 'cancelled')
        ? html`<p>${actionButton(session, `${runHref(run.id)}/resume`, 'Resume run', {
            confirm: `Resume this run of ${run.pipeline}? Steps that completed are kept; the others run again.`,
          })}</p>`
        : ''
    }${(() => {
      const controls = runControls(session, run, mayChangeRun);
      return controls.length ? html`<p>${controls}</p>` : '';
    })()}</div>
<h2>Steps</h2>${dagSvg(nodes)}
${run.attempt > 1 ? attemptList(run, steps) : ''}
${jobTable([...steps].reverse())}
${(() => {
  // What the steps handed on (issue 36): name=value lines each wrote to $SCHEDFLOW_OUTPUTS.
  const outputs = Object.entries(runOutputsView(steps)).flatMap(([step, values]) =>
    Object.entries(values).map(([name, value]) => ({ step, name, value })),
  );
  return outputs.length
    ? html`<h2>Outputs</h2><table class="run-outputs"><thead><tr><th>Step</th><th>Name</th><th>Value</th></tr></thead><tbody>${outputs.map(
        (o) => html`<tr><td>${o.step}</td><td><code>${o.name}</code></td><td><code>${o.value}</code></td></tr>`,
      )}</tbody></table>`
    : '';
})()}
${
  transitions.length
    ? html`<h2>State changes</h2><ul class="run-transitions">${transitions.map(
        (t) =>
          html`<li>${time(t.at)} — ${t.fromState ?? 'made'} → ${t.toState} <span class="muted">(${t.source}${t.detail ? `: ${t.detail}` : ''})</span></li>`,
      )}</ul>`
    : ''
}${
  misses.length
    ? html`<h2>Deadlines missed</h2><ul>${misses.map((m) => html`<li>${time(m.at)} — ${m.kind}: ${m.detail}</li>`)}</ul>`
    : ''
}${
  summary
    ? html`<h2>Summary</h2><div class="panel">${
        summary.text
          ? html`<p style="white-space:pre-wrap">${summary.text}</p>`
          : html`<p class="muted">${summary.state === 'pending' ? 'Being written…' : (summary.error ?? summary.note ?? '—')}</p>`
      }</div>`
    : ''
}`;
    return sendPage(
      reply,
      page({ title: `Run ${run.pipeline}`, nav: 'runs', session, body, live: 'watched', flash: flashOf(request) }),
    );
  });
}

/** Which steps ran in which attempt of a resumed run, with their jobs. */
function attemptList(run: PipelineRunRow, steps: readonly JobRequestRow[]): Html {
  const attempts = Array.from({ length: run.attempt }, (_, i) => i + 1);
  return html`<h2>Attempts</h2><ul class="run-attempts">${attempts.map((n) => {
    const made = steps.filter((s) => s.runAttempt === n);
    return html`<li data-attempt="${String(n)}">Attempt ${String(n)}: ${
      made.length
        ? made.map(
            (s, i) =>
              html`${i ? ', ' : ''}<a href="${jobHref(s.id)}">${s.step ?? '?'}</a> (${s.state}${s.jobId === null ? '' : `, job ${s.jobId}`})`,
          )
        : html`<span class="muted">no step</span>`
    }</li>`;
  })}</ul>`;
}

/**
 * A cron expression in words ("At 02:30, Monday through Friday"), in the
 * 24-hour clock of the fire times beside it; null for one cronstrue cannot
 * read (the page then shows the expression alone).
 */
function cronInWords(cron: string): string | null {
  try {
    return cronstrue.toString(cron, { use24HourTimeFormat: true, verbose: false });
  } catch {
    return null;
  }
}

function scheduleText(p: PipelineSummary): Html {
  if (!p.schedule) {
    return html`<span class="muted">no schedule: runs when triggered${p.on.length ? ' or when the runs below end' : ''}</span>`;
  }
  const words = cronInWords(p.schedule.cron);
  return html`${words ?? ''}${words ? html`<br>` : ''}<code>${p.schedule.cron}</code> <span class="muted">(${p.schedule.timezone})</span>${
    p.schedule.enabled ? '' : html` <strong>off</strong>`
  }${p.schedule.paused ? html` <strong>paused</strong>` : ''}`;
}

type Schedule = NonNullable<PipelineSummary['schedule']>;

/** Whether the schedule ticks, and if not, who or what stopped it. */
function scheduleState(schedule: Schedule): Html {
  const off = schedule.enabled ? null : html`off in the file (<code>schedule.enabled: false</code>)`;
  if (!schedule.paused) return off ?? html`on`;
  return html`<strong>paused</strong> by ${schedule.paused.by} at ${time(Date.parse(schedule.paused.at))}${off ? html`; also ${off}` : ''}`;
}

function scheduleControls(session: UiSession, name: string, schedule: Schedule, mayChange: boolean): Html {
  const note = html`<p class="muted">A paused schedule makes no runs from its ticks, in every daemon on this history and after a restart, until it is resumed; triggering by hand still works. A file with <code>schedule.enabled: false</code> keeps the schedule off even when resumed here: the file wins for off.</p>`;
  if (!mayChange) return note;
  const button = schedule.paused
    ? actionButton(session, `${pipelineHref(name)}/resume`, 'Resume schedule', {
        ariaLabel: `Resume schedule of ${name}`,
      })
    : actionButton(session, `${pipelineHref(name)}/pause`, 'Pause schedule', {
        danger: true,
        ariaLabel: `Pause schedule of ${name}`,
        confirm: `Pause the schedule of ${name}? Its ticks make no runs until it is resumed.`,
      });
  return html`${button}${note}`;
}

function triggerForm(session: UiSession, p: PipelineSummary, given: Record<string, string> = {}): Html {
  const params = Object.entries(p.params);
  return html`<h2>Trigger now</h2><form class="stack panel" method="post" action="${pipelineHref(p.name)}/trigger">
<input type="hidden" name="_csrf" value="${session.csrfToken}">
${
  params.length
    ? params.map(
        ([name, dflt]) =>
          html`<label>${name}${dflt === null ? ' (required)' : ''}<input name="param.${name}" value="${given[name] ?? ''}" placeholder="${dflt ?? ''}"${
            dflt === null ? html` required` : ''
          }></label>`,
      )
    : html`<p class="muted">This pipeline takes no parameters.</p>`
}
<button type="submit">Trigger ${p.name}</button></form>`;
}

export function runTable(runs: PipelineRunRow[]): Html {
  if (runs.length === 0) return html`<p class="muted">No runs yet.</p>`;
  return html`<div class="table-wrap"><table class="responsive"><thead><tr><th>Run</th><th>Pipeline</th><th>State</th><th>Trigger</th><th>Created</th><th>Took</th></tr></thead><tbody>${runs.map(
    (r) =>
      html`<tr><td data-label="Run"><a href="${runHref(r.id)}">${r.id.slice(0, 8)}</a></td><td data-label="Pipeline">${r.pipeline}</td><td data-label="State">${stateBadge(
        r.state,
        { liveId: r.id },
      )}</td><td data-label="Trigger">${r.trigger}</td><td data-label="Created">${time(r.createdAt)}</td><td data-label="Took">${
        r.startedAt ? duration((r.endedAt ?? Date.now()) - r.startedAt) : '—'
      }</td></tr>`,
  )}</tbody></table></div>`;
}
