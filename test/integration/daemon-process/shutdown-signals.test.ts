import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  cleanEnv,
  type DaemonProcess,
  type Exit,
  killLeftovers,
  READY_TIMEOUT_MS,
  spawnDaemon,
} from '../../helpers/cli-process.js';
import { waitFor } from '../../helpers/http.js';

/**
 * `schedflow start` as a user runs it first: no REDIS_URL (its private redis-server) and no
 * profile (the embedded simulator), stopped by a signal to the process alone (`kill`) or to
 * its whole process group (a terminal's Ctrl-C, most supervisors). Every shutdown step must
 * run, each under its own limit, and the private Redis must not outlive the daemon.
 */

let root: string | undefined;
/** Private redis-servers a test saw start: one a failed test left running is stopped by its pid. */
const redisPids = new Set<number>();

afterEach(async () => {
  await killLeftovers();
  for (const pid of redisPids) {
    if (alive(pid)) process.kill(pid, 'SIGKILL');
  }
  redisPids.clear();
  if (root) rmSync(root, { recursive: true, force: true });
  root = undefined;
});

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

/** The steps of a full all-in-one daemon, in the order they stop: the reverse of their start. */
const ALL_STEPS = [
  // First: commands stop finding a daemon that is going away (src/daemon-registry.ts).
  'daemon registration',
  'local API',
  'queue keeper',
  'workers',
  'pipeline files',
  'queues',
  'heap collector',
  'redis watch',
  'scheduler clients',
  'request budgets',
  'simulator',
  'history checkpoints',
  'history registration',
  'history',
  'redis-server',
  'data dir lock',
];

/** Generous: the requirement is under 2 s on an idle daemon; a loaded CI machine gets slack. */
const EXIT_WITHIN_MS = 5000;
/** How long the exit is waited for before the test fails naming what the daemon logged. */
const EXIT_WAIT_MS = 15_000;
/**
 * A test's own bound: longer than the bounds inside it, so that a slow start fails (if it does)
 * with its own message. A start takes 2 s alone and went past 30 s beside the whole suite, on CI.
 */
const TEST_TIMEOUT_MS = READY_TIMEOUT_MS + EXIT_WAIT_MS + 10_000;

/**
 * Pino's JSON lines, in the order of their times: written to a pipe, a line can reach it a
 * little after the next one (seen: a step's line after the following step's, 1 ms apart).
 */
/** The daemon's JSON lines in the order it wrote them (one process, one stream: no sort by `time`, whose milliseconds a wall clock stepped back would reorder). */
function logLines(stdout: string): { msg?: string; level?: number; step?: string; time?: number }[] {
  return stdout
    .split('\n')
    .filter((l) => l.startsWith('{'))
    .map((l) => JSON.parse(l) as { msg?: string; time?: number });
}

function startEmbedded(): DaemonProcess {
  root = mkdtempSync(join(tmpdir(), 'schedflow-signals-'));
  return spawnDaemon({
    dataDir: join(root, 'data'),
    configDir: join(root, 'config'),
    env: cleanEnv(),
    cwd: root,
    extraArgs: ['--sim-port', '0'],
    ownProcessGroup: true,
  });
}

function privateRedisPid(): number {
  const pid = Number(readFileSync(join(root as string, 'data', 'redis', 'redis.pid'), 'utf8'));
  expect(pid).toBeGreaterThan(0);
  redisPids.add(pid);
  return pid;
}

/** The exit, or a failure naming what the daemon logged, once the limit has passed. */
async function exitWithin(daemon: DaemonProcess, ms: number): Promise<Exit> {
  const late = new Promise<never>((_, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`the daemon was still running ${ms} ms after the signal\n${daemon.stdout}`)),
      ms,
    );
    void daemon.exited.finally(() => clearTimeout(timer));
  });
  return Promise.race([daemon.exited, late]);
}

const CASES = [
  { signal: 'SIGINT', code: 130, target: 'group' },
  { signal: 'SIGTERM', code: 143, target: 'group' },
  { signal: 'SIGINT', code: 130, target: 'process' },
  { signal: 'SIGTERM', code: 143, target: 'process' },
] as const;

describe('an idle daemon on its private Redis and the embedded simulator, signalled', () => {
  for (const { signal, code, target } of CASES) {
    it(
      `${signal} to the ${target}: exits ${code} within seconds, every step run and logged, its Redis stopped`,
      async () => {
        const daemon = startEmbedded();
        await daemon.ready();
        const redisPid = privateRedisPid();

        const signalledAt = Date.now();
        process.kill(target === 'group' ? -daemon.pid : daemon.pid, signal);
        const exit = await exitWithin(daemon, EXIT_WAIT_MS);
        const took = exit.at - signalledAt;
        console.info(`${signal} to the ${target}: exit after ${took} ms`);

        expect(exit, daemon.stdout).toMatchObject({ code, signal: null });
        const logs = logLines(daemon.stdout);
        expect(logs.find((l) => l.msg === 'shutting down')).toMatchObject({ signal, level: 30 });
        expect(
          logs.filter((l) => l.msg === 'shutdown step done').map((l) => l.step),
          `every step, in reverse start order; the daemon's output:\n${daemon.stdout}`,
        ).toEqual(ALL_STEPS);
        const shutdown = logs.slice(logs.findIndex((l) => l.msg === 'shutting down'));
        expect(
          shutdown.filter((l) => (l.level ?? 0) >= 40).map((l) => l.msg),
          'warnings or errors',
        ).toEqual([]);
        expect(logs.at(-1)?.msg).toBe('shutdown complete');
        expect(daemon.stderr).toBe('');
        expect(took).toBeLessThan(EXIT_WITHIN_MS);
        // Stopped by the daemon, last: it does not outlive a daemon that exits.
        expect(alive(redisPid)).toBe(false);
      },
      TEST_TIMEOUT_MS,
    );
  }
});

describe('a signal while the daemon is still starting', () => {
  it(
    'stops what had started, its private Redis too, and exits 143',
    async () => {
      const daemon = startEmbedded();
      // Its private Redis answers; the rest (simulator, queues, workers, API) is still to come.
      await daemon.waitForOutput(/"msg":"started a private redis-server"/);
      const redisPid = privateRedisPid();
      daemon.child.kill('SIGTERM');
      const exit = await exitWithin(daemon, EXIT_WAIT_MS);

      expect(exit, `${daemon.stdout}\n${daemon.stderr}`).toMatchObject({ code: 143, signal: null });
      const logs = logLines(daemon.stdout);
      expect(logs.find((l) => l.msg === 'shutting down')).toMatchObject({ signal: 'SIGTERM' });
      const steps = logs.filter((l) => l.msg === 'shutdown step done').map((l) => l.step);
      // Whatever had started by then is undone, ending as a full shutdown ends.
      expect(steps.slice(-3)).toEqual(['history', 'redis-server', 'data dir lock']);
      expect(daemon.stderr).toBe('');
      await waitFor(async () => (alive(redisPid) ? undefined : true), {
        what: 'the private redis-server to be gone',
        timeoutMs: 5000,
        intervalMs: 100,
      });
    },
    TEST_TIMEOUT_MS,
  );
});
