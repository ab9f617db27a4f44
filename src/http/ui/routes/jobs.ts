import type { FastifyInstance, FastifyReply } from 'fastify';
import { changeOwner, readOwner } from '../../../access/visibility.js';
import { getAccountingJob, getProfileSync } from '../../../db/accounting.js';
import { tasksOf } from '../../../db/array-tasks.js';
import { missesOfRequest } from '../../../db/deadline-misses.js';
import { replaysOf } from '../../../db/idempotency.js';
import { getReadableRequest, getRequest, jobsPage, transitionsOf } from '../../../db/requests.js';
import { type ArrayTaskRow, type JobRequestRow, REQUEST_STATES, type RequestState } from '../../../db/schema.js';
import { summaryOfRequest } from '../../../db/summaries.js';
import { deliveriesOfRequest } from '../../../db/webhooks.js';
import { NoTasksToRetryError, SubmissionRefusedError } from '../../../errors.js';
import { jobUidOf } from '../../../lib/host-users.js';
import { describeArrayOutcome, formatCounts, summarizeArray, tasksToList } from '../../../requests/array-state.js';
import { attemptsOf } from '../../../requests/attempts.js';
import { cancelRequest } from '../../../requests/canceller.js';
import { taskOutputPaths } from '../../../requests/job-output.js';
import { hasAttempts, resubmittedAfterLoss } from '../../../requests/lost-resubmit.js';
import { isTerminalRequest, mayResubmit } from '../../../requests/request-state.js';
import type { JobSpec } from '../../../sched/job-spec.js';
import { type OutputTail, outputTails } from '../../../summaries/output-tail.js';
import { outputRedactor } from '../../../summaries/redact.js';
import { pendingView } from '../../../views/pending-view.js';
import { deliveryView, freshnessView, jobView } from '../../../views/views.js';
import { uiAuditContext } from '../../audit-context.js';
import { pendingPartitionLoad } from '../../pending-load.js';
import { queryField, sendPage, sessionOf, type UiContext } from '../context.js';
import { duration, type Html, html, stateBadge, time } from '../html.js';
import { actionButton, page, UI_PREFIX } from '../layout.js';
import { pendingCell, pendingFacts } from '../pending-facts.js';
import { isAdmin, principalOfLogin, type UiSession } from '../sessions.js';
import { lacksScope, mayUiAct, mayUiChange } from '../ui-access.js';
import { clusterHref } from './cluster.js';
import { dayRange, flashOf, pipelineOptions, runAccessOfSession, selectField, textField } from './common.js';
import { jobControls } from './job-control.js';

export const jobHref = (id: string): string => `${UI_PREFIX}/jobs/${encodeURIComponent(id)}`;

export async function jobPages(app: FastifyInstance, { ctx }: { ctx: UiContext }): Promise<void> {
  const { store } = ctx.deps;

  app.get(`${UI_PREFIX}/jobs`, async (request, reply) => {
    const session = sessionOf(request);
    const state = queryField(request, 'state');
    const profile = queryField(request, 'profile');
    const pipeline = queryField(request, 'pipeline');
    const range = dayRange(queryField(request, 'from'), queryField(request, 'to'));
    const rows = await jobsPage(ctx.deps.store, {
      states: state && (REQUEST_STATES as readonly string[]).includes(state) ? [state as RequestState] : undefined,
      profile,
      pipeline,
      createdSince: range.sinceMs,
      createdUntil: range.untilMs,
      // Only the user's owner's, unless an admin or an auditor (src/access/visibility.ts).
      owner: readOwner(principalOfLogin(session)),
      limit: 200,
    });
    const body = html`<h1>Jobs</h1>
<form class="filters" method="get" action="${UI_PREFIX}/jobs" aria-label="filter jobs">
${selectField('state', 'State', ['', ...REQUEST_STATES], state)}
${selectField('profile', 'Profile', ['', ...ctx.deps.profiles.keys()], profile)}
${selectField('pipeline', 'Pipeline', ['', ...(await pipelineOptions(ctx, session))], pipeline)}
${textField('from', 'From (day)', queryField(request, 'from'), 'date')}
${textField('to', 'To (day)', queryField(request, 'to'), 'date')}
<button type="submit">Filter</button></form>
${jobTable(rows.slice(0, 200))}
${rows.length > 200 ? html`<p class="muted">The newest 200 are shown; narrow the filters to see others.</p>` : ''}`;
    return sendPage(reply, page({ title: 'Jobs', nav: 'jobs', session, body, live: 'all' }));
  });

  app.get<{ Params: { id: string } }>(`${UI_PREFIX}/jobs/:id`, async (request, reply) => {
    const session = sessionOf(request);
    // Another owner's request is as unknown as one that does not exist; a step of a run the user
    // reads (through a pipeline's `allow:`) is read as the run is.
    const row = await getReadableRequest(store, request.params.id, await runAccessOfSession(ctx, session, 'read'));
    if (!row) return notFound(reply, session);
    // An array job's task whose output (and accounting) the page shows: `?task=N`.
    const task = queryField(request, 'task');
    const taskId = task !== undefined && /^\d{1,9}$/.test(task) ? Number(task) : null;
    const body = await jobDetail(ctx, row, session, taskId);
    return sendPage(
      reply,
      page({
        title: `Job ${row.name}`,
        nav: 'jobs',
        session,
        body,
        live: 'watched',
        flash: flashOf(request),
        // "as of 12 s ago" and the output tail move on without a transition.
        ...(!isTerminalRequest(row.state) && { refreshEverySec: 10 }),
      }),
    );
  });

  app.post<{ Params: { id: string } }>(`${UI_PREFIX}/jobs/:id/cancel`, async (request, reply) => {
    const session = sessionOf(request);
    if (!mayUiAct(session, 'cancel')) return reply.code(403).type('text/plain').send(lacksScope('cancel', 'cancel'));
    const id = request.params.id;
    // Another owner's request reads as one that does not exist.
    if (!(await getRequest(store, id, { owner: changeOwner(principalOfLogin(session)) }))) {
      return reply.redirect(`${jobHref(id)}?done=cancel-not_found`, 303);
    }
    let done: string;
    try {
      const outcome = await cancelRequest(
        { store, submitQueue: ctx.deps.queues.submit, clients: ctx.deps.clients, logger: ctx.deps.logger },
        id,
        { source: 'api', who: `web UI (${session.who})`, audit: uiAuditContext(request, session) },
      );
      done = `cancel-${outcome.kind}`;
    } catch (error) {
      ctx.deps.logger.warn({ requestId: id, err: error }, 'UI cancel failed');
      done = 'cancel-error';
    }
    return reply.redirect(`${jobHref(id)}?done=${done}`, 303);
  });

  app.post<{ Params: { id: string } }>(`${UI_PREFIX}/jobs/:id/retry-tasks`, async (request, reply) => {
    const session = sessionOf(request);
    if (!mayUiAct(session, 'submit')) return reply.code(403).type('text/plain').send(lacksScope('submit', 'retry'));
    const id = request.params.id;
    // Another owner's request reads as one that does not exist.
    if (!(await getRequest(store, id, { owner: changeOwner(principalOfLogin(session)) }))) {
      return notFound(reply, session);
    }
    try {
      const retried = await ctx.deps.retryTasks({
        requestId: id,
        origin: 'api',
        source: 'api',
        actor: session.actor,
        httpRequestId: request.id,
      });
      ctx.deps.logger.info(
        { requestId: retried.id, retryOf: id, by: session.who },
        'array tasks retried from the web UI',
      );
      return reply.redirect(`${jobHref(retried.id)}?done=tasks-retried`, 303);
    } catch (error) {
      if (error instanceof SubmissionRefusedError) return reply.redirect(`${jobHref(id)}?done=retry-refused`, 303);
      if (!(error instanceof NoTasksToRetryError)) throw error;
      return reply.redirect(`${jobHref(id)}?done=tasks-retry-not`, 303);
    }
  });

  app.post<{ Params: { id: string } }>(`${UI_PREFIX}/jobs/:id/retry`, async (request, reply) => {
    const session = sessionOf(request);
    if (!mayUiAct(session, 'submit')) return reply.code(403).type('text/plain').send(lacksScope('submit', 'retry'));
    // Another owner's request reads as one that does not exist.
    const row = await getRequest(store, request.params.id, { owner: changeOwner(principalOfLogin(session)) });
    if (!row || !mayResubmit(row.state)) return reply.redirect(`${jobHref(request.params.id)}?done=retry-not`, 303);
    let newId: string;
    try {
      newId = await ctx.deps.submit({
        profile: row.profile,
        spec: row.spec as JobSpec,
        origin: 'api',
        owner: row.owner,
        actor: session.actor,
        webhookUrl: row.webhookUrl,
        deadlines: row.deadlines,
      });
    } catch (error) {
      // Refused at the door (a scope the profile's token lacks, another account): say so, not a 500.
      if (error instanceof SubmissionRefusedError) return reply.redirect(`${jobHref(row.id)}?done=retry-refused`, 303);
      throw error;
    }
    ctx.deps.logger.info({ requestId: newId, retryOf: row.id, by: session.who }, 'request retried from the web UI');
    return reply.redirect(`${jobHref(newId)}?done=retried`, 303);
  });
}

function notFound(reply: FastifyReply, session: UiSession): FastifyReply {
  return sendPage(
    reply,
    page({ title: 'Not found', nav: 'jobs', session, body: html`<h1>No such job request</h1>` }),
    404,
  );
}

export function jobTable(rows: Omit<JobRequestRow, 'spec'>[]): Html {
  if (rows.length === 0) return html`<p class="muted">No job requests match.</p>`;
  return html`<div class="table-wrap"><table class="responsive"><thead><tr><th>Name</th><th>State</th><th>Pending</th><th>Job id</th><th>Profile</th><th>Step</th><th>Created</th><th>Run time</th></tr></thead><tbody>
${rows.map(
  (r) =>
    html`<tr><td data-label="Name"><a href="${jobHref(r.id)}">${r.name}</a></td><td data-label="State">${stateBadge(
      r.state,
      { liveId: r.id },
    )}${r.heldAt !== null ? html` <span class="held" title="held by ${r.heldBy ?? 'unknown'}">held</span>` : ''}</td><td data-label="Pending">${pendingCell(pendingView(r))}</td><td data-label="Job id">${r.jobId ?? '—'}</td><td data-label="Profile">${r.profile}</td><td data-label="Step">${
      r.step ?? '—'
    }</td><td data-label="Created">${time(r.createdAt)}</td><td data-label="Run time">${
      r.startedAt ? duration((r.endedAt ?? Date.now()) - r.startedAt) : '—'
    }</td></tr>`,
)}</tbody></table></div>`;
}

async function jobDetail(ctx: UiContext, row: JobRequestRow, session: UiSession, taskId: number | null): Promise<Html> {
  const h = ctx.deps.store;
  // Asked together, not one after another: on PostgreSQL they run side by side, and on SQLite
  // close together (no write in between, mostly), as the synchronous reads did.
  const [transitions, sync, accounting, summary, misses, deliveries, replays, tasks, attempts, load] =
    await Promise.all([
      transitionsOf(h, row.id),
      getProfileSync(h, row.profile),
      row.jobId !== null ? getAccountingJob(h, row.profile, row.jobId) : undefined,
      summaryOfRequest(h, row.id),
      missesOfRequest(h, row.id),
      // Newest first in their table.
      deliveriesOfRequest(h, row.id).then((oldestFirst) => oldestFirst.reverse()),
      replaysOf(h, row.id),
      row.arrayTaskCount === null ? [] : tasksOf(h, row.id),
      hasAttempts(row) ? attemptsOf(h, row.id) : [],
      // The cluster view's last kept answer only: no scheduler read per job page.
      pendingPartitionLoad(ctx.deps.clusterView, row),
    ]);
  const isArray = row.arrayTaskCount !== null;
  // An array's accounting records are its tasks': the one under the array's job id is one task's
  // (the last to start), never the array's outcome. The page shows the chosen task's record.
  const task = isArray && taskId !== null ? tasks.find((t) => t.taskId === taskId) : undefined;
  const shownAccounting = !isArray
    ? accounting
    : task?.jobId != null
      ? await getAccountingJob(h, row.profile, task.jobId)
      : undefined;
  const recordOwner = shownAccounting && task ? `task ${task.taskId} (job ${task.jobId})` : null;
  const fresh = freshnessView(row, sync, ctx.deps.settings.pollCeilingMs);
  // "as of 12 s ago" (the profile's last poll), "stale" and why when the answer cannot be trusted.
  const ageSec = fresh.profile.seconds_since_poll;
  const answerAge = fresh.profile.answer_age_sec;
  const freshness =
    isTerminalRequest(row.state) || row.jobId === null || ageSec === null
      ? html`<span${fresh.stale ? html` class="stale"` : ''}>${fresh.detail}</span>`
      : fresh.stale
        ? html`<span class="stale">as of ${ageSec} s ago, stale: ${fresh.detail}</span>`
        : html`<span>as of ${ageSec} s ago${
            answerAge ? ` (the scheduler's answer was ${answerAge} s old)` : ''
          }</span>`;

  const actions: Html[] = [];
  const canCancel = mayUiChange(session, 'cancel', row.owner);
  const canRetry = mayUiChange(session, 'submit', row.owner);
  if (canCancel && !isTerminalRequest(row.state)) {
    actions.push(
      actionButton(session, `${jobHref(row.id)}/cancel`, 'Cancel job', {
        danger: true,
        confirm: `Cancel ${row.name}${row.jobId !== null ? ` (job ${row.jobId})` : ''}?`,
      }),
    );
  }
  actions.push(...jobControls(session, row));
  if (canRetry && mayResubmit(row.state)) {
    actions.push(actionButton(session, `${jobHref(row.id)}/retry`, 'Retry (new request, same spec)'));
  }
  const failedTasks = tasks.filter((task) => isTerminalRequest(task.state) && task.state !== 'completed');
  if (canRetry && failedTasks.length > 0) {
    actions.push(actionButton(session, `${jobHref(row.id)}/retry-tasks`, 'Retry failed tasks (new request)'));
  }

  // One story in time order; entries of the same time keep the order they are listed in here.
  // An adopted job was found as its (only) `submitted` transition was recorded, whose detail says how.
  const adoptedAt = row.adopted ? (transitions.find((t) => t.toState === 'submitted')?.at ?? row.submittedAt) : null;
  const events: { at: number; item: Html }[] = [
    ...transitions.map((t) => ({
      at: t.at,
      item: html`${t.fromState ?? 'new'} → ${stateBadge(t.toState)} <span class="muted">(${t.source}${
        t.rawState ? `, Slurm ${t.rawState}` : ''
      }${t.stale ? ', from a stale answer' : ''})</span>${t.reason ? html`<br>reason: ${t.reason}` : ''}${
        t.detail ? html`<br><span class="muted">${t.detail}</span>` : ''
      }`,
    })),
    ...(adoptedAt !== null
      ? [
          {
            at: adoptedAt,
            item: html`deduplicated: the scheduler already had this request's job (found by its marker after a lost answer or an interrupted submit), so it was adopted, not submitted twice`,
          },
        ]
      : []),
    ...replays.map((r) => ({
      at: r.firstAt,
      item: html`deduplicated: the same request was POSTed again with Idempotency-Key <code>${r.key}</code> (token ${
        r.tokenName
      }), answered with this request${r.count === 1 ? ' (once)' : html` (${r.count} times, the last at ${time(r.lastAt)})`}`,
    })),
    ...misses.map((m) => ({ at: m.at, item: html`deadline missed (${m.kind}): ${m.detail}` })),
    ...retryEvents(row, attempts),
    ...(accounting && !isArray
      ? [
          {
            at: accounting.syncedAt,
            item: html`accounting record imported (the latest import): ${accounting.state}${
              accounting.exitCode !== null ? `, exit ${accounting.exitCode}` : ''
            }`,
          },
        ]
      : []),
    ...(summary
      ? [
          {
            at: summary.completedAt ?? summary.updatedAt,
            item: html`summary ${summary.state}${summary.kind ? ` (${summary.kind})` : ''}`,
          },
        ]
      : []),
  ];
  events.sort((a, b) => a.at - b.at);
  const timeline = html`<ol class="timeline" aria-label="timeline">${events.map(
    (e) => html`<li>${time(e.at)} — ${e.item}</li>`,
  )}</ol>`;

  // The request as the API and the webhooks describe it (src/views/).
  const viewer = { admin: isAdmin(session) };
  const v = jobView(row, viewer);
  const facts = html`<dl class="facts">
<dt>State</dt><dd>${stateBadge(v.state, { liveId: v.id })}${v.reason ? html` <span class="muted">${v.reason}</span>` : ''}</dd>
${pendingFacts(v.pending, load, clusterHref(row.profile))}
<dt>Freshness</dt><dd>${freshness}</dd>
${
  v.held
    ? html`<dt>Held</dt><dd><strong>held</strong> by ${v.held.by} since ${time(v.held.at)}${
        v.job_id === null ? html` <span class="muted">(kept back: submitted once released)</span>` : ''
      }</dd>`
    : ''
}<dt>Scheduler job id</dt><dd>${v.job_id ?? 'not submitted yet'}</dd>
<dt>Profile</dt><dd>${v.profile}</dd>
<dt>Owner</dt><dd>${v.owner}${v.actor ? html` <span class="muted">(made by ${v.actor})</span>` : ''}</dd>
<dt>Origin</dt><dd>${v.origin}${
    v.run_id
      ? html` — run <a href="${UI_PREFIX}/runs/${encodeURIComponent(v.run_id)}">${v.run_id.slice(0, 8)}</a>, step ${v.step}, attempt ${v.attempt}`
      : ''
  }</dd>
<dt>Created</dt><dd>${time(v.created_at)}</dd>
<dt>Submitted</dt><dd>${time(v.submitted_at)}</dd>
<dt>Started</dt><dd>${time(v.started_at)}</dd>
<dt>Ended</dt><dd>${time(v.ended_at)}</dd>
<dt>Exit code</dt><dd>${v.exit_code ?? '—'}${v.signal !== null ? ` (signal ${v.signal})` : ''}${
    isArray && v.exit_code !== null ? html` <span class="muted">(the highest of its tasks')</span>` : ''
  }</dd>
${
  isArray
    ? html`<dt>Output</dt><dd>each task its own: <code>${(row.spec as JobSpec).standard_output || 'slurm-%A_%a.out'}</code> <span class="muted">(see the tasks below)</span></dd>`
    : html`<dt>Stdout</dt><dd>${row.stdoutPath ? html`<code>${row.stdoutPath}</code>` : '—'}</dd>
<dt>Stderr</dt><dd>${
        row.stderrPath === null
          ? '—'
          : row.stderrPath === row.stdoutPath
            ? html`<span class="muted">with stdout</span>`
            : html`<code>${row.stderrPath}</code>`
      }</dd>`
}
${v.error ? html`<dt>Error</dt><dd>${v.error.code ?? ''} ${v.error.message}</dd>` : ''}
${row.resubmitOf ? html`<dt>Resubmits</dt><dd><a href="${jobHref(row.resubmitOf)}">${row.resubmitOf}</a></dd>` : ''}
<dt>Request id</dt><dd><code>${v.id}</code></dd></dl>`;

  // The job's user's uid here, which its output files must belong to (null: not known).
  const jobUser = shownAccounting?.user ?? accounting?.user ?? null;
  const jobUserUid = await jobUidOf(jobUser);
  const accountingPanel = shownAccounting
    ? html`<h2>Accounting${recordOwner ? ` of ${recordOwner}` : ''}</h2><div class="panel"><dl class="facts">
<dt>State</dt><dd>${shownAccounting.state} <span class="muted">(${shownAccounting.rawState})</span></dd>
<dt>Account / user</dt><dd>${shownAccounting.account} / ${shownAccounting.user}</dd>
<dt>Partition</dt><dd>${shownAccounting.partition}</dd>
<dt>Nodes</dt><dd>${shownAccounting.nodes ?? '—'}</dd>
<dt>CPUs</dt><dd>${shownAccounting.cpus ?? '—'}</dd>
<dt>Memory per node</dt><dd>${shownAccounting.memoryPerNodeMb !== null ? `${shownAccounting.memoryPerNodeMb} MB` : '—'}</dd>
<dt>Elapsed</dt><dd>${shownAccounting.elapsedSec !== null ? duration(shownAccounting.elapsedSec * 1000) : '—'}</dd>
<dt>Time limit</dt><dd>${shownAccounting.timeLimitMin !== null ? `${shownAccounting.timeLimitMin} min` : '—'}</dd>
<dt>CPU time</dt><dd>${shownAccounting.cpuTimeSec !== null ? duration(shownAccounting.cpuTimeSec * 1000) : '—'}</dd>
<dt>Exit code</dt><dd>${shownAccounting.exitCode ?? '—'}</dd>
<dt>Reason</dt><dd>${shownAccounting.reason ?? '—'}</dd></dl></div>`
    : '';

  const summaryPanel = summary
    ? html`<h2>Summary</h2><div class="panel">${
        summary.text
          ? html`<p style="white-space:pre-wrap">${summary.text}</p>`
          : html`<p class="muted">${summary.state === 'pending' ? 'Being written…' : (summary.error ?? summary.note ?? '—')}</p>`
      }<p class="muted">${summary.kind ?? ''}${summary.model ? ` · ${summary.model}` : ''}${
        summary.note ? ` · ${summary.note}` : ''
      }</p></div>`
    : '';

  // An array job's outcome is its tasks': how many ended how, then every task, each with a link
  // to its own output (`slurm-%A_%a.out` by default) and accounting record.
  const arrayPanel = isArray ? arrayTasksPanel(row, tasks, taskId) : '';

  return html`<h1 data-watch="${row.id}">${row.name}</h1>
<div class="actions">${actions}</div>
<div class="panel">${facts}</div>
${arrayPanel}
${attemptsPanel(row, attempts)}
<h2>Timeline</h2>${timeline}
${accountingPanel}${summaryPanel}${
  isArray
    ? taskOutputPanel(ctx, row, task, taskId, jobUser, jobUserUid)
    : outputPanel(ctx, row, jobUser, jobUserUid, accounting?.nodes ?? null)
}
${
  deliveries.length
    ? html`<h2>Webhook deliveries</h2><div class="table-wrap"><table><thead><tr><th>Event</th><th>State</th><th>Attempts</th><th>Last status</th><th>Created</th></tr></thead><tbody>${deliveries.map(
        (row) => {
          const d = deliveryView(row, viewer);
          // Without the admin scope the receiver's answer is not shown (deliveryView): only that an attempt failed.
          const failed = d.state === 'failed' || (d.state === 'pending' && d.attempts > 0);
          const last = d.last_error ?? d.last_status ?? (!viewer.admin && failed ? 'an attempt failed' : '—');
          return html`<tr><td>${d.event}</td><td>${d.state}</td><td>${d.attempts}</td><td>${last}</td><td>${time(row.createdAt)}</td></tr>`;
        },
      )}</tbody></table></div>`
    : ''
}`;
}

/**
 * What the retry policy did around this attempt, for its timeline: why it was made, what follows
 * it. A resubmit after the controller lost the job before it started is said as such: no policy
 * made it.
 */
function retryEvents(row: JobRequestRow, attempts: readonly JobRequestRow[]): { at: number; item: Html }[] {
  const events: { at: number; item: Html }[] = [];
  const cause = row.retryCause;
  if (cause) {
    const previous = attempts.find((a) => a.id === cause.previousId);
    const word = previous && resubmittedAfterLoss(previous) ? 'resubmit' : 'retry';
    events.push({
      at: row.createdAt,
      item: html`${word}: attempt ${row.attempt}, after <a href="${jobHref(cause.previousId)}">attempt ${row.attempt - 1}</a> — ${cause.reason}`,
    });
  }
  const endedAt = row.endedAt ?? row.updatedAt;
  const by = resubmittedAfterLoss(row)
    ? 'resubmit after the controller lost the job before it started'
    : 'retry policy';
  if (row.retryDueAt !== null) {
    events.push({ at: endedAt, item: html`${by}: attempt ${row.attempt + 1} due at ${time(row.retryDueAt)}` });
  }
  if (row.nextAttemptId !== null) {
    events.push({
      at: endedAt,
      item: html`${by}: <a href="${jobHref(row.nextAttemptId)}">attempt ${row.attempt + 1}</a> made`,
    });
  }
  if (row.retryNote !== null) events.push({ at: endedAt, item: html`retry policy: no retry — ${row.retryNote}` });
  return events;
}

/** Every attempt of this request (each its own Slurm job), when it has a retry policy. */
function attemptsPanel(row: JobRequestRow, attempts: readonly JobRequestRow[]): Html {
  if (!hasAttempts(row)) return html``;
  return html`<h2>Attempts</h2><div class="table-wrap"><table aria-label="attempts"><thead><tr><th>Attempt</th><th>State</th><th>Slurm job</th><th>Exit</th><th>Why</th></tr></thead><tbody>${attempts.map(
    (a) =>
      html`<tr><td data-label="Attempt">${a.id === row.id ? html`<strong>${a.attempt}</strong>` : html`<a href="${jobHref(a.id)}">${a.attempt}</a>`}</td><td data-label="State">${stateBadge(
        a.state,
      )}</td><td data-label="Slurm job">${a.jobId ?? '—'}</td><td data-label="Exit">${a.exitCode ?? '—'}</td><td data-label="Why">${
        a.retryCause?.reason ?? 'first attempt'
      }</td></tr>`,
  )}</tbody></table></div>`;
}

function outputPanel(
  ctx: UiContext,
  row: JobRequestRow,
  user: string | null,
  uid: number | null,
  node: string | null,
): Html {
  if (row.jobId === null) return html``;
  // A file last written before the job could have run is another job's (ids are reused).
  const since = row.startedAt ?? row.submittedAt ?? row.createdAt;
  const spec = row.spec as JobSpec;
  const tails = outputTails(
    spec,
    { jobId: row.jobId, name: row.name, user, node, uid },
    ctx.settings.outputTailBytes ?? 8192,
    since - 60_000,
    ctx.settings.protectedDirs,
    { stdout: row.stdoutPath, stderr: row.stderrPath },
  );
  // The job's own environment values (tokens, passwords) are masked, as in summaries and the API.
  return html`<h2 id="output">Output</h2>${tailsHtml(tails, outputRedactor(spec))}`;
}

/** Task rows a page lists at most, failures first: an array may have thousands. */
const TASKS_LISTED = 200;

function arrayTasksPanel(row: JobRequestRow, tasks: readonly ArrayTaskRow[], taskId: number | null): Html {
  const total = row.arrayTaskCount ?? tasks.length;
  const { counts } = summarizeArray(tasks, total);
  const listed = tasksToList(tasks, TASKS_LISTED);
  const taskHref = (id: number) => `${jobHref(row.id)}?task=${id}#output`;
  return html`<h2>Array tasks</h2><div class="panel"><p><strong>${describeArrayOutcome(counts, total)}</strong></p><p>${String(
    (row.spec as { array?: unknown }).array ?? '',
  )}: ${total} tasks — ${formatCounts(counts)}</p>${
    row.arrayRetryOf ? html`<p>Retries tasks of <a href="${jobHref(row.arrayRetryOf)}">${row.arrayRetryOf}</a></p>` : ''
  }${
    listed.length
      ? html`<div class="table-wrap"><table aria-label="array tasks"><thead><tr><th>Task</th><th>Job id</th><th>State</th><th>Exit code</th><th>Nodes</th><th>Reason</th><th>Output</th></tr></thead><tbody>${listed.map(
          (t) =>
            html`<tr${t.taskId === taskId ? html` aria-current="true"` : ''}><td>${t.taskId}</td><td>${t.jobId ?? '—'}</td><td>${stateBadge(
              t.state,
            )}</td><td>${t.exitCode ?? '—'}</td><td>${t.nodes ?? '—'}</td><td>${t.reason ?? '—'}</td><td><a href="${taskHref(
              t.taskId,
            )}" aria-label="output of task ${t.taskId}">output</a></td></tr>`,
        )}</tbody></table></div>${
          tasks.length > listed.length
            ? html`<p class="muted">${listed.length} of ${tasks.length} tasks listed (those that did not complete first); any task's output: add <code>?task=N</code> to this page's address.</p>`
            : ''
        }`
      : ''
  }</div>`;
}

/** The output of the array task chosen (`?task=N`): each task writes its own file. */
function taskOutputPanel(
  ctx: UiContext,
  row: JobRequestRow,
  task: ArrayTaskRow | undefined,
  taskId: number | null,
  user: string | null,
  uid: number | null,
): Html {
  if (taskId === null) {
    return html`<h2 id="output">Output</h2><p class="muted">Each task of an array job writes its own output (<code>slurm-%A_%a.out</code> unless the spec names another pattern): choose a task's output in the table above.</p>`;
  }
  const heading = html`<h2 id="output">Output of task ${taskId}${task?.jobId != null ? ` (job ${task.jobId})` : ''}</h2>`;
  if (!task || task.jobId === null || row.jobId === null) {
    return html`${heading}<p class="muted">Task ${taskId} has not started: it has written no output yet.</p>`;
  }
  const since = task.startedAt ?? row.submittedAt ?? row.createdAt;
  const spec = row.spec as JobSpec;
  const tails = outputTails(
    spec,
    { jobId: task.jobId, name: row.name, user, node: task.nodes, uid, arrayJobId: row.jobId, arrayTaskId: task.taskId },
    ctx.settings.outputTailBytes ?? 8192,
    since - 60_000,
    ctx.settings.protectedDirs,
    taskOutputPaths(row, task, user),
  );
  return html`${heading}${tailsHtml(tails, outputRedactor(spec))}`;
}

function tailsHtml(tails: readonly OutputTail[], redactor: ReturnType<typeof outputRedactor>): Html {
  return html`${tails.map(
    (t) =>
      html`<p class="muted">${t.label}: <code>${t.path}</code>${t.sizeBytes !== null ? ` (${t.sizeBytes} bytes)` : ''}</p>${
        t.text !== null
          ? html`<pre class="output" aria-label="${t.label} tail">${redactor.redact(t.text)}</pre>`
          : html`<p class="muted">${t.note}</p>`
      }`,
  )}`;
}
