import type { FastifyInstance } from 'fastify';
import { seesEveryOwner } from '../../../access/principal.js';
import { clusterSamplesSince } from '../../../db/cluster-samples.js';
import { SchedflowError } from '../../../errors.js';
import type { Node, Partition, ReservationRecord } from '../../../sched/cluster-model.js';
import type { ClusterAnswer, ClusterViewData, ClusterViewName } from '../../../sched/cluster-view.js';
import { queueJobBody } from '../../../views/cluster-view.js';
import {
  allocationChart,
  cpuBar,
  cpuLegend,
  nodeCpuSummary,
  nodeStateColour,
  nodeStateLabel,
  nodeStatesChart,
} from '../cluster-charts.js';
import { queryField, sendPage, sessionOf, type UiContext } from '../context.js';
import { type Html, html, time } from '../html.js';
import { page, UI_PREFIX } from '../layout.js';
import { principalOfLogin } from '../sessions.js';

/** The ranges the allocation chart offers, in hours; the first is the default. */
const RANGES_H = [6, 1, 24] as const;
/** Jobs of the controller's queue listed on the page (running first, as the view orders them). */
const QUEUE_ROWS = 200;

export const clusterHref = (profile: string) => `${UI_PREFIX}/cluster/${encodeURIComponent(profile)}`;

/** One view's answer, or why there is none (the scheduler unread and nothing kept). */
type Outcome<V extends ClusterViewName> = { ok: ClusterAnswer<ClusterViewData[V]> } | { error: string };

/**
 * The Cluster page of a profile: its partitions, nodes, reservations and the controller's queue,
 * from the cluster view's shared answers (src/sched/cluster-view.ts: one read of the scheduler per
 * view per lifetime for every viewer of every web process, never one per visitor), with the
 * allocation of each partition over the last hours (the samples workers/cluster-samples.ts
 * records) and the nodes by state. The page fetches itself again once per lifetime of the view.
 * The queue's names, users and accounts are shown to admins and auditors only, as the API does.
 */
export async function clusterPages(app: FastifyInstance, { ctx }: { ctx: UiContext }): Promise<void> {
  app.get(`${UI_PREFIX}/cluster`, async (request, reply) => {
    const first = [...ctx.deps.profiles.keys()][0];
    if (first) return reply.redirect(clusterHref(first), 303);
    const session = sessionOf(request);
    const body = html`<h1>Cluster</h1><p class="muted">The daemon has no scheduler profile.</p>`;
    return sendPage(reply, page({ title: 'Cluster', nav: 'cluster', session, body }));
  });

  app.get<{ Params: { profile: string } }>(`${UI_PREFIX}/cluster/:profile`, async (request, reply) => {
    const session = sessionOf(request);
    const { profile } = request.params;
    if (!ctx.deps.profiles.has(profile)) {
      const body = html`<h1>No such profile</h1><p>The daemon has: ${[...ctx.deps.profiles.keys()].map(
        (p, i) => html`${i ? ', ' : ''}<a href="${clusterHref(p)}">${p}</a>`,
      )}</p>`;
      return sendPage(reply, page({ title: 'Not found', nav: 'cluster', session, body }), 404);
    }
    const view = ctx.deps.clusterView;
    if (!view) {
      const body = html`<h1>Cluster · ${profile}</h1><p class="muted">This process does not serve the cluster view.</p>`;
      return sendPage(reply, page({ title: 'Cluster', nav: 'cluster', session, body }), 503);
    }
    const hoursText = queryField(request, 'hours');
    const hours = RANGES_H.find((h) => String(h) === hoursText) ?? RANGES_H[0];
    const now = Date.now();
    const fromMs = now - hours * 3_600_000;
    const read = async <V extends ClusterViewName>(name: V): Promise<Outcome<V>> => {
      try {
        return { ok: await view.view(profile, name) };
      } catch (error) {
        // The scheduler could not be read and no earlier answer is kept: said in the section.
        if (error instanceof SchedflowError) return { error: error.message };
        throw error;
      }
    };
    const [partitions, nodes, reservations, queue, samples] = await Promise.all([
      read('partitions'),
      read('nodes'),
      read('reservations'),
      read('queue'),
      clusterSamplesSince(ctx.deps.store, profile, fromMs),
    ]);
    const everyOwner = seesEveryOwner(principalOfLogin(session));
    const answers = [partitions, nodes, reservations, queue].flatMap((o) => ('ok' in o ? [o.ok] : []));
    const oldest = answers.reduce<ClusterAnswer<unknown> | null>(
      (a, b) => (a === null || b.fetchedAt < a.fetchedAt ? b : a),
      null,
    );
    const stale = answers.find((a) => a.stale);
    const ttlSec = Math.round(view.ttlMs / 1000);
    const partitionNames = 'ok' in partitions ? partitions.ok.data.map((p) => p.name) : [];
    const profiles = [...ctx.deps.profiles.keys()];
    const body = html`<h1>Cluster · ${profile}</h1>
${
  profiles.length > 1
    ? html`<p class="actions" aria-label="profiles">${profiles.map(
        (p) => html`<a href="${clusterHref(p)}"${p === profile ? html` aria-current="page"` : ''}>${p}</a> `,
      )}</p>`
    : ''
}
<p class="muted" data-fetched-at="${oldest ? oldest.fetchedAt.toISOString() : ''}">${
      oldest
        ? html`Read from the scheduler at ${time(oldest.fetchedAt.getTime())} (${oldest.ageSec} s ago); every viewer shares this answer, read again every ${ttlSec} s at most.`
        : 'Nothing could be read from the scheduler yet.'
    }</p>
${stale ? html`<p class="flash error" role="status">The scheduler cannot be read now: shown is its last answer. ${stale.staleReason ?? ''}</p>` : ''}
<div class="charts"><section class="panel" aria-labelledby="allocation"><h2 id="allocation">Allocated CPUs by partition, last ${hours} h (UTC)</h2>
<p class="range">${RANGES_H.map(
      (h) =>
        html`<a href="${clusterHref(profile)}?hours=${h}"${h === hours ? html` aria-current="true"` : ''}>${h} h</a> `,
    )}</p>
${allocationChart(samples, partitionNames, fromMs, now)}</section>
<section class="panel" aria-labelledby="node-states"><h2 id="node-states">Nodes by state</h2>${
      'ok' in nodes ? html`${nodeStatesChart(nodes.ok.data)}${nodeCpuSummary(nodes.ok.data)}` : unavailable(nodes.error)
    }</section></div>
<h2 id="partitions">Partitions</h2>
<div data-view="partitions" data-view-fetched-at="${'ok' in partitions ? partitions.ok.fetchedAt.toISOString() : ''}">${
      'ok' in partitions ? partitionTable(partitions.ok.data) : unavailable(partitions.error)
    }</div>
<h2 id="nodes">Nodes</h2>
<div data-view="nodes" data-view-fetched-at="${'ok' in nodes ? nodes.ok.fetchedAt.toISOString() : ''}">${
      'ok' in nodes ? nodeTable(nodes.ok.data) : unavailable(nodes.error)
    }</div>
<h2 id="reservations">Reservations</h2>
${'ok' in reservations ? reservationTable(reservations.ok.data) : unavailable(reservations.error)}
<h2 id="queue">Queue</h2>
${'ok' in queue ? queueTable(queue.ok.data.jobs, everyOwner) : unavailable(queue.error)}`;
    return sendPage(
      reply,
      page({ title: `Cluster · ${profile}`, nav: 'cluster', session, body, refreshEverySec: Math.max(5, ttlSec) }),
    );
  });
}

function unavailable(why: string): Html {
  return html`<p class="stale">Not available: ${why}</p>`;
}

const limitText = (t: Partition['limits']['maxTime']) =>
  t === null ? '—' : t === 'infinite' ? 'unlimited' : minutesText(t.minutes);

function minutesText(min: number): string {
  if (min % 1440 === 0) return `${min / 1440} d`;
  if (min % 60 === 0) return `${min / 60} h`;
  return `${min} min`;
}

const mb = (n: number | null) =>
  n === null ? '—' : n >= 1024 ? `${(n / 1024).toFixed(n % 1024 ? 1 : 0)} GB` : `${n} MB`;

const list = (items: readonly string[], none = 'all') =>
  items.length ? items.join(', ') : html`<span class="muted">${none}</span>`;

function partitionTable(rows: readonly Partition[]): Html {
  if (rows.length === 0) return html`<p class="muted">The scheduler lists no partitions.</p>`;
  return html`<div class="table-wrap"><table class="responsive cluster" aria-labelledby="partitions"><thead><tr><th>Partition</th><th>State</th><th>Nodes</th><th>CPUs (allocated / idle / other / total)</th><th>Memory allocated</th><th>Jobs running</th><th>Jobs pending</th><th>Limits</th><th>Who may use it</th></tr></thead><tbody>${rows.map(
    (p) =>
      html`<tr data-partition="${p.name}"><td data-label="Partition"><strong>${p.name}</strong></td><td data-label="State">${stateText(
        p.state,
      )}</td><td data-label="Nodes">${p.nodeCount} <span class="muted">${p.nodeList}</span></td><td data-label="CPUs" data-cpus="${p.cpus.allocated}/${p.cpus.idle}/${p.cpus.other}/${p.cpus.total}"><span class="num">${p.cpus.allocated} / ${p.cpus.idle} / ${p.cpus.other} / ${p.cpus.total}</span> ${cpuBar(
        p.cpus,
      )}</td><td data-label="Memory">${mb(p.memoryMb.allocated)} of ${mb(p.memoryMb.total)}</td><td data-label="Running" data-running="${p.jobs.running}">${p.jobs.running}</td><td data-label="Pending" data-pending="${p.jobs.pending}">${p.jobs.pending}</td><td data-label="Limits">max time ${limitText(
        p.limits.maxTime,
      )}${p.limits.defaultTime !== null ? html`, default ${limitText(p.limits.defaultTime)}` : ''}${
        p.limits.maxNodes !== null ? html`, max ${p.limits.maxNodes} nodes` : ''
      }${p.limits.maxMemoryPerNodeMb !== null ? html`, ${mb(p.limits.maxMemoryPerNodeMb)}/node` : ''}${
        p.limits.maxMemoryPerCpuMb !== null ? html`, ${mb(p.limits.maxMemoryPerCpuMb)}/CPU` : ''
      }</td><td data-label="Who may use it">accounts ${list(p.access.allowedAccounts)}${
        p.access.deniedAccounts.length ? html`, not ${p.access.deniedAccounts.join(', ')}` : ''
      }${p.access.allowedGroups.length ? html`; groups ${p.access.allowedGroups.join(', ')}` : ''}${
        p.access.allowedQos.length ? html`; QOS ${p.access.allowedQos.join(', ')}` : ''
      }${p.access.deniedQos.length ? html`; not QOS ${p.access.deniedQos.join(', ')}` : ''}</td></tr>`,
  )}</tbody></table></div>${cpuLegend()}`;
}

function stateText(state: string): Html {
  return html`<span class="node-state" style="background:${nodeStateColour(
    state === 'UP' ? 'IDLE' : state === 'INACTIVE' ? 'FUTURE' : state,
  )}">${state}</span>`;
}

function nodeTable(rows: readonly Node[]): Html {
  if (rows.length === 0) return html`<p class="muted">The scheduler lists no nodes.</p>`;
  return html`<div class="table-wrap"><table class="responsive cluster" aria-labelledby="nodes"><thead><tr><th>Node</th><th>State</th><th>Reason</th><th>CPUs allocated</th><th>Memory allocated</th><th>Features</th><th>GRES</th><th>Partitions</th><th>Jobs on it</th></tr></thead><tbody>${rows.map(
    (n) =>
      html`<tr data-node="${n.name}"><td data-label="Node"><strong>${n.name}</strong></td><td data-label="State">${nodeStateBadge(
        n,
      )}${
        n.stateFlags.length > 1 ? html` <span class="muted">${n.stateFlags.join(', ')}</span>` : ''
      }</td><td data-label="Reason">${
        n.reason
          ? html`${n.reason}${n.reasonSetBy ? html` <span class="muted">(${n.reasonSetBy}${n.reasonSince ? html`, ${time(n.reasonSince * 1000)}` : ''})</span>` : ''}`
          : html`<span class="muted">—</span>`
      }</td><td data-label="CPUs" data-cpus="${n.allocatedCpus}/${n.cpus}">${n.allocatedCpus} of ${n.cpus}</td><td data-label="Memory">${mb(
        n.allocatedMemoryMb,
      )} of ${mb(n.memoryMb)}</td><td data-label="Features">${list(n.activeFeatures.length ? n.activeFeatures : n.features, '—')}</td><td data-label="GRES">${
        n.gres
          ? html`${n.gres}${n.gresUsed ? html` <span class="muted">(used ${n.gresUsed})</span>` : ''}`
          : html`<span class="muted">—</span>`
      }</td><td data-label="Partitions">${n.partitions.join(', ')}</td><td data-label="Jobs" data-jobs="${n.jobIds.join(',')}">${
        n.jobIds.length ? n.jobIds.join(', ') : html`<span class="muted">none</span>`
      }</td></tr>`,
  )}</tbody></table></div>`;
}

function nodeStateBadge(n: Node): Html {
  const label = nodeStateLabel(n);
  return html`<span class="node-state" style="background:${nodeStateColour(label)}">${label}</span>`;
}

function reservationTable(rows: readonly ReservationRecord[]): Html {
  if (rows.length === 0) return html`<p class="muted">No reservations.</p>`;
  return html`<div class="table-wrap"><table class="responsive cluster" aria-labelledby="reservations"><thead><tr><th>Reservation</th><th>Start</th><th>End</th><th>Nodes</th><th>Cores</th><th>Flags</th><th>For</th><th>Partition</th></tr></thead><tbody>${rows.map(
    (r) =>
      html`<tr data-reservation="${r.name}"><td data-label="Reservation"><strong>${r.name}</strong></td><td data-label="Start">${time(
        r.startTime === null ? null : r.startTime * 1000,
      )}</td><td data-label="End">${time(r.endTime === null ? null : r.endTime * 1000)}</td><td data-label="Nodes">${r.nodeCount} <span class="muted">${
        r.nodeList
      }</span></td><td data-label="Cores">${r.coreCount}</td><td data-label="Flags">${list(r.flags, '—')}</td><td data-label="For">${
        [
          r.users.length ? `users ${r.users.join(', ')}` : '',
          r.accounts.length ? `accounts ${r.accounts.join(', ')}` : '',
          r.groups.length ? `groups ${r.groups.join(', ')}` : '',
        ]
          .filter(Boolean)
          .join('; ') || '—'
      }</td><td data-label="Partition">${r.partition ?? html`<span class="muted">any</span>`}</td></tr>`,
  )}</tbody></table></div>`;
}

function queueTable(jobs: ClusterViewData['queue']['jobs'], everyOwner: boolean): Html {
  if (jobs.length === 0) return html`<p class="muted">The controller has no pending or running jobs.</p>`;
  // The same body the API sends (src/views/cluster-view.ts): one decision of what a reader sees.
  const rows = jobs.slice(0, QUEUE_ROWS).map((j) => queueJobBody(j, !everyOwner));
  const hidden = html`<span class="muted">hidden</span>`;
  return html`${
    everyOwner
      ? ''
      : html`<p class="muted">The queue holds every user's jobs: their names, users and accounts are shown to admins and auditors only.</p>`
  }<div class="table-wrap"><table class="responsive cluster" aria-labelledby="queue"><thead><tr><th>Job id</th><th>Name</th><th>User</th><th>Account</th><th>Partition</th><th>State</th><th>Reason</th><th>Submitted</th><th>Started</th><th>Time limit</th><th>CPUs</th><th>Nodes</th></tr></thead><tbody>${rows.map(
    (j) =>
      html`<tr data-job="${j.job_id}"><td data-label="Job id">${
        j.array_job_id !== null && j.array_task_id !== null ? `${j.array_job_id}_${j.array_task_id}` : j.job_id
      }</td><td data-label="Name">${j.name ?? hidden}</td><td data-label="User">${j.user ?? hidden}</td><td data-label="Account">${
        j.account ?? hidden
      }</td><td data-label="Partition">${j.partition}</td><td data-label="State"><span class="state state-${j.state.toLowerCase()}">${
        j.state
      }</span></td><td data-label="Reason">${j.reason ?? html`<span class="muted">—</span>`}</td><td data-label="Submitted">${time(
        j.submit_time,
      )}</td><td data-label="Started">${time(j.start_time)}</td><td data-label="Time limit">${
        j.time_limit === null ? '—' : j.time_limit === 'infinite' ? 'unlimited' : minutesText(j.time_limit)
      }</td><td data-label="CPUs">${j.cpus ?? '—'}</td><td data-label="Nodes">${j.nodes ?? html`<span class="muted">—</span>`}</td></tr>`,
  )}</tbody></table></div>${
    jobs.length > QUEUE_ROWS
      ? html`<p class="muted">The first ${QUEUE_ROWS} of ${jobs.length} jobs are listed.</p>`
      : ''
  }`;
}
