import type { FastifyInstance } from 'fastify';
import { seesEveryOwner } from '../../../access/principal.js';
import { getProfileSync } from '../../../db/accounting.js';
import { appendAudit } from '../../../db/audit.js';
import { toError } from '../../../errors.js';
import { withTimeout } from '../../../lib/with-timeout.js';
import { QUEUE_NAMES, type QueueName } from '../../../queue/catalog.js';
import { uiAuditContext } from '../../audit-context.js';
import { sendPage, sessionOf, type UiContext } from '../context.js';
import { html, time } from '../html.js';
import { actionButton, page, UI_PREFIX } from '../layout.js';
import { isAdmin, principalOfLogin } from '../sessions.js';
import { flashOf } from './common.js';

const QUEUE_READ_TIMEOUT_MS = 1000;

/**
 * Profiles (the scheduler each one reaches, its last poll, the resolved API
 * version and its request budget) and the queues, which admins may pause.
 */
export async function profilePages(app: FastifyInstance, { ctx }: { ctx: UiContext }): Promise<void> {
  const { store, clients, queues } = ctx.deps;

  app.get(`${UI_PREFIX}/profiles`, async (request, reply) => {
    const session = sessionOf(request);
    const syncs = await Promise.all([...ctx.deps.profiles.values()].map((p) => getProfileSync(store, p.name)));
    const now = Date.now();
    const profiles = [...ctx.deps.profiles.values()].map((p, i) => {
      const sync = syncs[i];
      const connected = clients.connected(p.name);
      const sincePollMs = sync?.lastPollAt != null ? now - sync.lastPollAt : null;
      const overdue = sincePollMs !== null && sincePollMs > 2 * ctx.deps.settings.pollCeilingMs;
      const staleSince = clients.health(p.name)?.staleSince() ?? null;
      // Why the profile cannot work, as its last check found: one sentence with the fix.
      const problem = clients.problem(p.name);
      const reachable = problem
        ? html`<span class="stale">${problem.kind === 'unreachable' ? 'no' : 'answers, but cannot be used'}: ${problem.sentence}</span>`
        : !connected
          ? html`<span class="stale">not yet: the first connection has not succeeded</span>`
          : staleSince !== null
            ? html`<span class="stale">no: serving stale answers since ${time(staleSince)} (the proxy's cache; the scheduler behind it does not answer)</span>`
            : sync?.lastPollOk === false
              ? html`<span class="stale">no: ${sync.lastPollError ?? 'the last poll failed'}</span>`
              : sync?.lastPollStale
                ? html`<span class="stale">serving cached answers (${sync.lastPollAgeSec ?? '?'} s old)</span>`
                : html`yes`;
      const rateLimited = /\b429\b|rate.?limit/i.test(sync?.lastPollError ?? '');
      const scopes = clients.scopes(p.name);
      // Plain slurmrestd: which accounts the user's associations allow (src/sched/account-check.ts).
      const accounts = clients.accounts(p.name);
      // A token without a scope submitting needs: said here, and its submissions are refused at the door.
      const scopesText = !scopes
        ? html`<span class="muted">not known until the scheduler answers</span>`
        : scopes.missing.length
          ? html`<span class="stale">${scopes.detail}</span>`
          : html`${scopes.detail}`;
      return html`<section class="panel" aria-labelledby="profile-${p.name}"><h2 id="profile-${p.name}">${p.name}</h2><dl class="facts">
<dt>Scheduler</dt><dd><code>${p.url}</code> (${p.flavor === 'proxy' ? 'the scheduler proxy' : 'plain slurmrestd'}, account ${p.account ?? '—'})</dd>
<dt>Check</dt><dd>${
        problem
          ? html`<strong class="stale">${problem.sentence}</strong> <span class="muted">(checked ${time(clients.status(p.name)?.checkedAt ?? null)}; jobs for it are refused until a check passes)</span>`
          : connected
            ? html`passed: reachable, credential accepted, API version served`
            : html`<span class="muted">not done yet</span>`
      }</dd>
<dt>API version</dt><dd>${connected ? clients.get(p.name).version : '—'} <span class="muted">(asked for ${p.version})</span></dd>
<dt>Token scopes</dt><dd>${scopesText}</dd>${
        accounts
          ? html`<dt>Accounts</dt><dd${accounts.defaultNotAssociated ? html` class="stale"` : ''}>${accounts.detail}</dd>`
          : ''
      }
<dt>Upstream reachable</dt><dd>${reachable}</dd>
<dt>Last poll</dt><dd>${time(sync?.lastPollAt ?? null)}${
        sincePollMs !== null
          ? html` <span${overdue ? html` class="stale"` : ''}>(${Math.round(sincePollMs / 1000)} s ago${overdue ? ', overdue' : ''})</span>`
          : ''
      }</dd>
<dt>Rate limit</dt><dd>${rateLimited ? html`<span class="stale">the scheduler refused for rate limit at the last poll</span>` : 'not limited at the last poll'}; schedflow's budget: ${
        p.rateLimit.capacity
      } requests, ${p.rateLimit.refillPerSecond} more per second</dd>
<dt>Accounting</dt><dd>${
        sync?.accountingOk === false
          ? html`<span class="stale">unavailable since ${time(sync.accountingCheckedAt)}: ${sync.accountingError ?? 'no answer'}; jobs are followed with controller data alone</span>`
          : sync?.accountingOk
            ? html`answering (checked ${time(sync.accountingCheckedAt)})`
            : 'not asked yet'
      }</dd>
<dt>Accounting imported to</dt><dd>${time(sync?.accountingSyncedTo != null ? sync.accountingSyncedTo * 1000 : null)}</dd></dl></section>`;
    });
    const queueRows = await Promise.all(
      QUEUE_NAMES.map(async (name) => {
        const q = queues[name];
        // Redis down (or closing under a page that refreshes itself) must not hold the page.
        const [counts, paused] = await withTimeout(
          Promise.all([
            q.getJobCounts('waiting', 'prioritized', 'active', 'delayed', 'failed', 'completed'),
            q.isPaused(),
          ]),
          QUEUE_READ_TIMEOUT_MS,
          'queue counts',
        ).catch(() => [null, null] as const);
        return { name, counts: counts ?? {}, paused, unknown: counts === null };
      }),
    );
    const admin = isAdmin(session) ? session : null;
    const body = html`<h1>Profiles</h1>${profiles}
<h2>Queues</h2><div class="table-wrap"><table class="responsive"><thead><tr><th>Queue</th><th>State</th><th>Waiting</th><th>Active</th><th>Delayed</th><th>Failed</th><th>Completed</th>${
      admin ? html`<th>Action</th>` : ''
    }</tr></thead><tbody>${queueRows.map(
      (q) =>
        html`<tr><td data-label="Queue">${q.name}</td><td data-label="State">${
          q.unknown
            ? html`<span class="stale">Redis not answering</span>`
            : q.paused
              ? html`<strong>paused</strong>`
              : 'running'
        }</td><td data-label="Waiting">${
          // Submit jobs wait with a priority (the fair share between owners, src/queue/fair-share.ts).
          (q.counts.waiting ?? 0) + (q.counts.prioritized ?? 0)
        }</td><td data-label="Active">${q.counts.active ?? 0}</td><td data-label="Delayed">${q.counts.delayed ?? 0}</td><td data-label="Failed">${
          q.counts.failed ?? 0
        }</td><td data-label="Completed">${q.counts.completed ?? 0}</td>${
          admin
            ? html`<td data-label="Action">${
                q.paused
                  ? actionButton(admin, `${UI_PREFIX}/queue-actions/${q.name}/resume`, 'Resume', {
                      ariaLabel: `Resume the ${q.name} queue`,
                    })
                  : actionButton(admin, `${UI_PREFIX}/queue-actions/${q.name}/pause`, 'Pause', {
                      danger: true,
                      ariaLabel: `Pause the ${q.name} queue`,
                      confirm: `Pause the ${q.name} queue? Its workers take no new jobs until it is resumed.`,
                    })
              }</td>`
            : ''
        }</tr>`,
    )}</tbody></table></div>
${seesEveryOwner(principalOfLogin(session)) ? html`<p><a href="${UI_PREFIX}/${admin ? 'queues-admin' : 'queues'}/">The queue dashboard</a> shows their jobs.</p>` : ''}`;
    return sendPage(
      reply,
      page({ title: 'Profiles', nav: 'profiles', session, body, flash: flashOf(request), refreshEverySec: 5 }),
    );
  });

  app.post<{ Params: { name: string; action: string } }>(
    `${UI_PREFIX}/queue-actions/:name/:action`,
    async (request, reply) => {
      const session = sessionOf(request);
      if (!isAdmin(session)) return reply.code(403).type('text/plain').send('the admin scope is needed');
      const { name, action } = request.params;
      if (!(QUEUE_NAMES as readonly string[]).includes(name) || (action !== 'pause' && action !== 'resume')) {
        return reply.code(404).type('text/plain').send('no such queue or action');
      }
      const queue = queues[name as QueueName];
      // Global pause: every worker of every schedflow process on this Redis stops taking jobs.
      // Redis holds it, not the history: its audit row is written alone, after it (or its failure).
      const audit = {
        ...uiAuditContext(request, session),
        at: Date.now(),
        owner: null,
        action: `queue.${action}`,
        target: `queue:${name}`,
      };
      try {
        if (action === 'pause') await queue.pause();
        else await queue.resume();
      } catch (error) {
        await appendAudit(ctx.deps.store, { ...audit, outcome: 'failed', detail: toError(error).message });
        throw error;
      }
      await appendAudit(ctx.deps.store, { ...audit, outcome: 'ok' });
      ctx.deps.logger.info(
        { queue: name, action, by: session.who },
        'queue %s from the web UI',
        action === 'pause' ? 'paused' : 'resumed',
      );
      return reply.redirect(`${UI_PREFIX}/profiles?done=${action === 'pause' ? 'paused' : 'resumed'}`, 303);
    },
  );
}
