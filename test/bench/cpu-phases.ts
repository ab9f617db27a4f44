/**
 * A V8 CPU profile (node --cpu-prof) of the daemon, summarised by phase of a submission. Each
 * sample goes to the phase of the innermost frame that names one (a library's or our own
 * folder's): a JSON.parse under the scheduler client is submission, the same under ioredis is
 * queue. Work done for polls, reconciles and the rest of the daemon's schedule (a listing's
 * parse under the scheduler client, say) is theirs, whatever its innermost frame: a sample
 * with one of their frames anywhere in its stack is counted apart. Samples outside the
 * measured window, and idle ones, are left out.
 */

interface ProfileNode {
  id: number;
  callFrame: { functionName: string; url: string; lineNumber: number };
  children?: number[];
}

export interface CpuProfile {
  nodes: ProfileNode[];
  startTime: number;
  endTime: number;
  samples: number[];
  timeDeltas: number[];
}

export const PHASES = [
  { name: 'history', label: 'history writes (SQLite, drizzle)', urls: ['/src/db/', 'better-sqlite3', 'drizzle-orm'] },
  { name: 'queue', label: 'queue (BullMQ, Redis)', urls: ['bullmq', 'ioredis', '/src/queue/', '/src/redis/'] },
  {
    name: 'submit',
    label: 'submit (job body, slurmrestd call, its answer)',
    // The scheduler client's own files: a spec's check (job-spec.ts, spec-validator.ts) is the
    // phase of whoever checks it, the door or the submission.
    urls: [
      '/src/sched/client',
      '/src/sched/transport',
      '/src/sched/exactly-once-submit',
      '/src/sched/codecs/',
      '/src/sched/request-budget',
      '/src/sched/shared-request-budget',
      '/src/sched/response-errors',
      'undici',
      '/workers/submit',
      '/src/requests/submitter',
    ],
  },
  {
    name: 'acceptance',
    label: 'API acceptance (HTTP, auth, validation)',
    urls: [
      '/src/http/',
      'fastify',
      'find-my-way',
      'light-my-request',
      'node:_http_',
      '/src/requests/accept',
      '/src/requests/door',
    ],
  },
  // Told by a schedule frame anywhere in the stack (SCHEDULE), not by the innermost one: the
  // request code a poll shares with a submission (transition.ts) is the submission's otherwise.
  { name: 'polls', label: 'polls and the rest of the schedule', urls: [] as string[] },
  { name: 'logging', label: 'logging (pino)', urls: ['pino', '/src/logger'] },
  { name: 'gc', label: 'garbage collection', urls: [] },
  { name: 'other', label: 'other (event loop, timers, startup of lazily loaded code)', urls: [] },
] as const;

type PhaseName = (typeof PHASES)[number]['name'];

export interface CpuByPhase {
  share: Record<PhaseName, number>;
  top: { phase: PhaseName; share: number; frame: string }[];
}

/** Frames of the daemon's schedule, not of a submission. */
const SCHEDULE = [
  '/workers/poll',
  '/src/requests/poll',
  '/src/requests/reconcile',
  '/workers/reconcile',
  '/workers/cluster-samples',
  '/workers/prune',
  '/workers/pipeline',
  '/src/sched/cluster',
];

function phaseOfUrl(url: string): PhaseName | undefined {
  for (const phase of PHASES) if (phase.urls.some((u) => url.includes(u))) return phase.name;
  return undefined;
}

/** Shares of the window's busy samples by phase; `windowStartMs`/`windowEndMs` are wall-clock, `exitMs` when the profile was written. */
export function cpuByPhase(
  profile: CpuProfile,
  windowStartMs: number,
  windowEndMs: number,
  exitMs: number,
): CpuByPhase {
  const byId = new Map(profile.nodes.map((n) => [n.id, n]));
  const parent = new Map<number, number>();
  for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const scheduled = new Map<number, boolean>();
  const inSchedule = (id: number): boolean => {
    const known = scheduled.get(id);
    if (known !== undefined) return known;
    const url = byId.get(id)?.callFrame.url ?? '';
    const up = parent.get(id);
    const is = SCHEDULE.some((u) => url.includes(u)) || (up !== undefined && inSchedule(up));
    scheduled.set(id, is);
    return is;
  };
  const phaseOfNode = new Map<number, PhaseName | null>();
  const innermost = (id: number): PhaseName | null => {
    const known = phaseOfNode.get(id);
    if (known !== undefined) return known;
    const node = byId.get(id);
    const name = node?.callFrame.functionName ?? '';
    let phase: PhaseName | null = null;
    if (name === '(garbage collector)') phase = 'gc';
    else if (name === '(idle)') phase = null;
    else {
      const own = node ? phaseOfUrl(node.callFrame.url) : undefined;
      const up = parent.get(id);
      phase = own ?? (up === undefined ? 'other' : innermost(up));
      if (phase === null) phase = 'other';
    }
    phaseOfNode.set(id, phase);
    return phase;
  };
  const resolve = (id: number): PhaseName | null => {
    const phase = innermost(id);
    return phase !== null && phase !== 'gc' && inSchedule(id) ? 'polls' : phase;
  };
  // The profile's clock is monotonic µs; its end is when the process wrote it (at exit).
  const fromUs = profile.endTime - (exitMs - windowStartMs) * 1000;
  const toUs = profile.endTime - (exitMs - windowEndMs) * 1000;
  const counts = new Map<PhaseName, number>();
  const frames = new Map<string, { phase: PhaseName; n: number }>();
  let total = 0;
  let at = profile.startTime;
  for (let i = 0; i < profile.samples.length; i++) {
    at += profile.timeDeltas[i] ?? 0;
    if (at < fromUs || at > toUs) continue;
    const id = profile.samples[i] as number;
    const phase = resolve(id);
    if (phase === null) continue;
    total++;
    counts.set(phase, (counts.get(phase) ?? 0) + 1);
    const f = byId.get(id)?.callFrame;
    const key = f
      ? `${f.functionName || '(anonymous)'} ${f.url.replace(/^.*\/node_modules\//, '').replace(/^.*\/(src|workers)\//, '$1/')}:${f.lineNumber + 1}`
      : '?';
    const entry = frames.get(key) ?? { phase, n: 0 };
    entry.n++;
    frames.set(key, entry);
  }
  const share = Object.fromEntries(
    PHASES.map((p) => [p.name, total ? (counts.get(p.name) ?? 0) / total : 0]),
  ) as Record<PhaseName, number>;
  const top = [...frames.entries()]
    .sort((a, b) => b[1].n - a[1].n)
    .slice(0, 25)
    .map(([frame, { phase, n }]) => ({ phase, share: n / total, frame }));
  return { share, top };
}
