import type { FastifyInstance } from 'fastify';
import { readOwner, seesExternalJobs } from '../../../access/visibility.js';
import { accountingHistory, accountingValues } from '../../../db/accounting.js';
import { charts } from '../charts-section.js';
import { queryField, sendPage, sessionOf, type UiContext } from '../context.js';
import { duration, html, time } from '../html.js';
import { page, UI_PREFIX } from '../layout.js';
import { principalOfLogin } from '../sessions.js';
import { dayRange, pipelineOptions, selectField, textField } from './common.js';
import { jobHref } from './jobs.js';

/** Rows read for the charts; the table shows the newest of them. */
const CHART_ROWS = 5000;
const TABLE_ROWS = 200;

/**
 * The history: Slurm's accounting records (schedflow's jobs and external ones
 * side by side) with filters, jobs per day by state and the run-time
 * distribution of what the filters select.
 */
export async function historyPages(app: FastifyInstance, { ctx }: { ctx: UiContext }): Promise<void> {
  const h = ctx.deps.store;
  app.get(`${UI_PREFIX}/history`, async (request, reply) => {
    const session = sessionOf(request);
    const state = queryField(request, 'state');
    const pipeline = queryField(request, 'pipeline');
    const account = queryField(request, 'account');
    const external = queryField(request, 'external');
    const from = queryField(request, 'from');
    const to = queryField(request, 'to');
    const range = dayRange(from, to);
    const [rows, states, accounts] = await Promise.all([
      accountingHistory(h, {
        states: state ? [state] : undefined,
        account,
        pipeline,
        external: external === 'only' ? true : external === 'none' ? false : undefined,
        sinceSec: range.sinceMs === undefined ? undefined : Math.floor(range.sinceMs / 1000),
        untilSec: range.untilMs === undefined ? undefined : Math.floor(range.untilMs / 1000),
        // The records of the user's owner's requests only, unless an admin or an auditor: the
        // charts are drawn from these rows, so they never show another owner's jobs either.
        owner: readOwner(principalOfLogin(session)),
        ownerSeesExternal: seesExternalJobs(readOwner(principalOfLogin(session))),
        limit: CHART_ROWS,
      }),
      accountingValues(h, 'state'),
      accountingValues(h, 'account'),
    ]);
    const body = html`<h1>History</h1>
<form class="filters" method="get" action="${UI_PREFIX}/history" aria-label="filter the history">
${selectField('state', 'Slurm state', ['', ...states], state)}
${selectField('pipeline', 'Pipeline', ['', ...(await pipelineOptions(ctx, session))], pipeline)}
${selectField('account', 'Account', ['', ...accounts], account)}
<label>External jobs<select name="external">${[
      ['', 'with schedflow’s'],
      ['only', 'external only'],
      ['none', 'schedflow’s only'],
    ].map(
      ([v, l]) => html`<option value="${v}"${(external ?? '') === v ? html` selected` : ''}>${l}</option>`,
    )}</select></label>
${textField('from', 'Submitted from (day, UTC)', from, 'date')}
${textField('to', 'to (day, UTC)', to, 'date')}
<button type="submit">Filter</button></form>
${charts(rows.map((r) => r.accounting))}
<h2>Jobs</h2>
${
  rows.length === 0
    ? html`<p class="muted">No accounting records match (they are imported every minute).</p>`
    : html`<div class="table-wrap"><table class="responsive"><thead><tr><th>Job id</th><th>Name</th><th>Slurm state</th><th>schedflow</th><th>Account</th><th>User</th><th>Partition</th><th>Submitted</th><th>Elapsed</th><th>Exit</th></tr></thead><tbody>${rows
        .slice(0, TABLE_ROWS)
        .map(
          ({ accounting: a, localState, taskId }) =>
            html`<tr><td data-label="Job id">${a.jobId}</td><td data-label="Name">${
              a.requestId ? html`<a href="${jobHref(a.requestId)}">${a.name}</a>` : a.name
            }</td><td data-label="Slurm state">${a.state}</td><td data-label="schedflow">${
              localState === null
                ? html`<span class="muted">external</span>`
                : taskId === null
                  ? localState
                  : html`<a href="${jobHref(a.requestId as string)}?task=${taskId}#output">task ${taskId}</a> of an array, ${localState}`
            }</td><td data-label="Account">${
              a.account
            }</td><td data-label="User">${a.user}</td><td data-label="Partition">${a.partition}</td><td data-label="Submitted">${time(
              a.submitTime !== null ? a.submitTime * 1000 : null,
            )}</td><td data-label="Elapsed">${a.elapsedSec !== null ? duration(a.elapsedSec * 1000) : '—'}</td><td data-label="Exit">${
              a.exitCode ?? '—'
            }</td></tr>`,
        )}</tbody></table></div>${
        rows.length > TABLE_ROWS
          ? html`<p class="muted">The newest ${TABLE_ROWS} of ${rows.length} are listed.</p>`
          : ''
      }`
}`;
    return sendPage(reply, page({ title: 'History', nav: 'history', session, body, live: 'all' }));
  });
}
