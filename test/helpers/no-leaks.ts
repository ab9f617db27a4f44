import { readdirSync, readFileSync } from 'node:fs';
import { isMainThread } from 'node:worker_threads';
import { afterAll } from 'vitest';

/**
 * Fails a test file that leaves something running behind it (graphile-worker's check after
 * each test, here after each file): a child process (redis-server, a daemon, a simulator,
 * anything it spawned in turn), an open socket (a BullMQ worker's or any ioredis connection,
 * an HTTP client or server connection), a pipe or a listening server; pending timers that keep
 * the process alive are reported. Loaded as a vitest setup file, so it runs before the file's
 * own imports and its `afterAll` runs after the file's own (hooks after a test run in reverse
 * order).
 */

/** Resource types that are a test's to close; vitest's own (its IPC pipe) are in the baseline. */
const WATCHED = ['TCPSocketWrap', 'TCPServerWrap', 'ProcessWrap', 'PipeWrap', 'UDPWrap'] as const;

/**
 * Pending timers are reported, not failed, for now: summaries.test.ts leaves 20 and
 * data-dir.test.ts one (found by this check, not yet traced; Node cannot say whose a timer is).
 */
const REPORTED = ['Timeout'] as const;

/** Closing is asynchronous (a socket's close event, a child's exit): how long a file has to finish it. */
const GRACE_MS = 3000;

function resourceCounts(): Map<string, number> {
  const counts = new Map<string, number>();
  for (const type of process.getActiveResourcesInfo()) counts.set(type, (counts.get(type) ?? 0) + 1);
  return counts;
}

interface ProcessInfo {
  pid: number;
  command: string;
}

/** Live (not zombie) descendants of this process, from /proc: a daemon's redis-server too. */
function descendants(): ProcessInfo[] {
  const byParent = new Map<number, ProcessInfo[]>();
  let entries: string[];
  try {
    entries = readdirSync('/proc');
  } catch {
    return [];
  }
  for (const entry of entries) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      // "pid (comm) state ppid …": comm may hold spaces and parentheses, so split after the last ')'.
      const close = stat.lastIndexOf(')');
      const [state, ppid] = stat.slice(close + 2).split(' ');
      if (state === 'Z' || state === 'X') continue;
      const command = readFileSync(`/proc/${entry}/cmdline`, 'utf8').split('\0').join(' ').trim();
      const list = byParent.get(Number(ppid)) ?? [];
      list.push({ pid: Number(entry), command: command || stat.slice(stat.indexOf('(') + 1, close) });
      byParent.set(Number(ppid), list);
    } catch {
      // gone meanwhile
    }
  }
  const found: ProcessInfo[] = [];
  const visit = (pid: number) => {
    for (const child of byParent.get(pid) ?? []) {
      found.push(child);
      visit(child.pid);
    }
  };
  visit(process.pid);
  return found;
}

/** What the open handles are, for the failure message (sockets by address, children by command). */
function describeHandles(types: string[]): string[] {
  const handles = (process as unknown as { _getActiveHandles?: () => unknown[] })._getActiveHandles?.() ?? [];
  const lines: string[] = [];
  for (const handle of handles) {
    const h = handle as {
      constructor?: { name?: string };
      remoteAddress?: string;
      remotePort?: number;
      localPort?: number;
      address?: () => unknown;
      spawnfile?: string;
      pid?: number;
      listening?: boolean;
    };
    const name = h.constructor?.name ?? 'handle';
    if (name === 'Socket' && h.remotePort !== undefined)
      lines.push(`socket ${h.localPort} → ${h.remoteAddress}:${h.remotePort}`);
    else if (name === 'Server' && h.listening) lines.push(`server listening on ${JSON.stringify(h.address?.())}`);
    else if (name === 'ChildProcess') lines.push(`child process ${h.pid} (${h.spawnfile})`);
  }
  return lines.length > 0 ? lines : types;
}

// In a worker thread (`--pool threads`) the process and its children are shared with the
// other threads' files: only this thread's own event loop resources are this file's.
const checkChildren = isMainThread;
// The process's own stdio streams are made on first use (pipes under vitest's forks): made now,
// they are in the baseline, not counted to the file that first used them. stdin too: madge's
// Vue parser (import-graph.test) copies every property of `process`, which makes it.
void process.stdin;
void process.stdout;
void process.stderr;
const baseResources = resourceCounts();

/**
 * Node's "possible EventTarget/EventEmitter memory leak" warnings (more than ten listeners on one
 * target): listeners that are never removed grow without bound, and where they are removed the
 * warning still reaches the daemon's stderr, outside its JSON log. Collected once per process
 * (files share it, isolate: false) and failed in the file during which they came.
 */
const LISTENER_WARNINGS = Symbol.for('schedflow.test.listenerWarnings');
type WithWarnings = typeof globalThis & { [LISTENER_WARNINGS]?: string[] };
function collectListenerWarnings(): string[] {
  const shared = globalThis as WithWarnings;
  const existing = shared[LISTENER_WARNINGS];
  if (existing) return existing;
  const list: string[] = [];
  process.on('warning', (warning) => {
    if (warning.name === 'MaxListenersExceededWarning') list.push(warning.stack ?? warning.message);
  });
  shared[LISTENER_WARNINGS] = list;
  return list;
}
// Not emptied here: a warning that came after the last file's check is this file's to report.
const listenerWarnings = collectListenerWarnings();
const baseChildren = new Set(checkChildren ? descendants().map((p) => p.pid) : []);

function leaks(): string[] {
  const found: string[] = [];
  const now = resourceCounts();
  const extra: string[] = [];
  for (const type of WATCHED) {
    const more = (now.get(type) ?? 0) - (baseResources.get(type) ?? 0);
    if (more > 0) extra.push(`${more} × ${type}`);
  }
  if (extra.length > 0) found.push(`open resources: ${extra.join(', ')}`);
  if (checkChildren) {
    const children = descendants().filter((p) => !baseChildren.has(p.pid));
    for (const child of children) found.push(`child process ${child.pid}: ${child.command.slice(0, 160)}`);
  }
  return found;
}

afterAll(async () => {
  const deadline = Date.now() + GRACE_MS;
  let found = leaks();
  while (found.length > 0 && Date.now() < deadline) {
    await new Promise((r) => setTimeout(r, 50));
    found = leaks();
  }
  // Less one: this hook's own timeout timer, which vitest runs while the hook does.
  const timers = REPORTED.map(
    (type) => [type, (resourceCounts().get(type) ?? 0) - (baseResources.get(type) ?? 0) - 1] as const,
  )
    .filter(([, more]) => more > 0)
    .map(([type, more]) => `${more} × ${type}`);
  if (timers.length > 0) console.warn(`the test file left pending: ${timers.join(', ')}`);
  const problems: string[] = [];
  if (found.length > 0) {
    const detail = found.some((f) => f.startsWith('open resources')) ? describeHandles([]) : [];
    problems.push(`the test file left running:\n  ${[...found, ...detail].join('\n  ')}`);
  }
  const warnings = listenerWarnings.splice(0);
  if (warnings.length > 0) problems.push(`listeners piled up on one target:\n${warnings.join('\n')}`);
  if (problems.length > 0) throw new Error(problems.join('\n'));
}, GRACE_MS + 2000);
