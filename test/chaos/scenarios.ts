import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { startCountingProxy, type UpstreamCounts } from './counting-proxy.js';
import { DaemonUnderTest, type ShutdownReport } from './daemon.js';
import { sleep, trackDir } from './processes.js';
import type { Random } from './random.js';
import { RealSlurm } from './real-slurm.js';
import { ExternalRedis } from './redis-server.js';
import { type JobTable, type RateLimit, SimUpstream } from './upstream.js';
import { judge, type TrialVerdict } from './verdict.js';
import { burst, type Submission } from './workload.js';

export interface RunSettings {
  ci: boolean;
  /** How long after a fault ends a request may take to become terminal before it is stuck. */
  deadlineMs: number;
  /** How long a signalled daemon may take to exit before the harness kills it. */
  shutdownWaitMs: number;
}

/** What one scenario's world is made of: a simulator behind a counting proxy, a daemon, maybe a Redis. */
export interface World {
  root: string;
  /** The simulator, in a simulator world (none against a real cluster). */
  sim: SimUpstream | undefined;
  /** Where the scheduler's own record of the jobs is read. */
  jobs: JobTable;
  daemon: DaemonUnderTest;
  redis?: ExternalRedis;
  counts(): UpstreamCounts;
  close(): Promise<void>;
}

export interface TrialResult {
  verdict: TrialVerdict;
  subs: Submission[];
  shutdown?: ShutdownReport;
}

export interface Scenario {
  name: string;
  /** What it does, for --help and the README. */
  what: string;
  /** The simulator's per-client bucket (default: generous, never a 429). */
  rateLimit?: RateLimit;
  externalRedis?: boolean;
  /** Runs against the real test cluster (`--slurm`) instead of the simulator. */
  slurm?: boolean;
  /** Added to every upstream request by the counting proxy. */
  upstreamLatencyMs?: number;
  logLevel?: 'info' | 'debug';
  /**
   * Scenarios with the same world key can share one world in a CI run (each trial leaves the
   * daemon running and its requests terminal), which saves a simulator and daemon start each.
   */
  world: string;
  /** Trials for a requested N (some scenarios are long: they run fewer). */
  trials(n: number, settings: RunSettings): number;
  trial(world: World, index: number, random: Random, settings: RunSettings): Promise<TrialResult>;
}

const GENEROUS: RateLimit = { capacity: 100_000, refillPerSecond: 100_000 };

export async function makeWorld(base: string, scenario: Scenario): Promise<World> {
  const root = trackDir(join(base, `${scenario.world}-${scenario.name}`));
  mkdirSync(root, { recursive: true, mode: 0o700 });
  if (scenario.slurm) return makeSlurmWorld(root);
  const sim = await SimUpstream.start(root, scenario.rateLimit ?? GENEROUS);
  const proxy = await startCountingProxy(sim.url, scenario.upstreamLatencyMs);
  const redis = scenario.externalRedis ? await ExternalRedis.start(join(root, 'redis')) : undefined;
  const daemon = new DaemonUnderTest(join(root, 'daemon'), {
    schedulerUrl: proxy.url,
    redisUrl: redis?.url,
    logLevel: scenario.logLevel,
  });
  await daemon.setup();
  await daemon.start();
  return {
    root,
    sim,
    jobs: sim,
    daemon,
    redis,
    counts: () => proxy.counts(),
    close: async () => {
      // The end of a world is not measured (the signal scenarios measure shutdowns): 3 s, then its group is killed.
      await daemon.stop(3000).catch(() => {});
      await proxy.close();
      await sim.stop();
      await redis?.kill();
    },
  };
}

export function simOf(world: World): SimUpstream {
  if (!world.sim) throw new Error('this scenario needs the simulator');
  return world.sim;
}

let realSlurm: RealSlurm | undefined;

/** A daemon on a slurmrestd profile of the real test cluster, behind the counting proxy. */
async function makeSlurmWorld(root: string): Promise<World> {
  realSlurm ??= await RealSlurm.up();
  const slurm = realSlurm;
  const proxy = await startCountingProxy(slurm.url);
  const daemon = new DaemonUnderTest(join(root, 'daemon'), {
    schedulerUrl: proxy.url,
    profile: slurm.profile(root, proxy.url),
    // alice's jobs really run on this machine: in a folder she can write.
    specExtra: { current_working_directory: '/tmp' },
  });
  await daemon.setup();
  await daemon.start();
  return {
    root,
    sim: undefined,
    jobs: slurm,
    daemon,
    counts: () => proxy.counts(),
    close: async () => {
      // The end of a world is not measured (the signal scenarios measure shutdowns): 3 s, then its group is killed.
      await daemon.stop(3000).catch(() => {});
      await proxy.close();
    },
  };
}

/** A burst with a fault injected at a random moment within it; resolves when both are done. */
async function burstWithFault(
  world: World,
  prefix: string,
  count: number,
  random: Random,
  fault: () => Promise<void>,
): Promise<Submission[]> {
  // A burst of 10 with gaps of 30–250 ms lasts about 1.4 s: the fault lands anywhere in it.
  const atMs = random.int(0, Math.round(count * 140));
  const subs = burst(world.daemon, prefix, count, random);
  await sleep(atMs);
  await fault();
  return subs;
}

const BURST = 10;

/** A daemon stopped by kill -9 (or a dead Redis) is started again and must finish the burst. */
function killScenario(name: string, what: string, kill: (world: World) => Promise<void>, slurm = false): Scenario {
  return {
    name,
    what,
    slurm,
    world: slurm ? 'slurm' : 'base',
    trials: (n, s) => (s.ci ? 2 : n),
    async trial(world, index, random, settings) {
      const subs = await burstWithFault(world, `${name}-${index}`, BURST, random, () => kill(world));
      // How long a daemon without its Redis takes to stop is not this scenario's figure (the
      // signal scenarios measure shutdowns): it gets 5 s, then its group is killed.
      await world.daemon.stop(5000);
      const restartAt = Date.now();
      await world.daemon.start();
      const verdict = await judge(world.daemon, world.jobs, subs, restartAt, settings.deadlineMs);
      return { verdict, subs };
    },
  };
}

/** The simulated cluster behind the proxy switched off for a while and on again. */
function outageScenario(
  name: string,
  what: string,
  parts: { slurmctld?: 'down'; slurmdbd?: 'down' },
  durationMs: (s: RunSettings) => number,
  trials: Scenario['trials'] = (n, s) => (s.ci ? 1 : n),
): Scenario {
  return {
    name,
    what,
    world: 'base',
    trials,
    async trial(world, index, random, settings) {
      const subs = await burstWithFault(world, `${name}-${index}`, BURST, random, () =>
        simOf(world).setUpstream(parts),
      );
      await sleep(durationMs(settings));
      await simOf(world).setUpstream({ slurmctld: 'up', slurmdbd: 'up' });
      const verdict = await judge(world.daemon, world.jobs, subs, Date.now(), settings.deadlineMs);
      return { verdict, subs };
    },
  };
}

/** A burst many times larger than the proxy's bucket, sent as fast as a client can. */
function stormScenario(
  name: string,
  what: string,
  rateLimit: RateLimit,
  size = { ci: 10, full: 30 },
  trials: Scenario['trials'] = (n, s) => (s.ci ? 1 : n),
): Scenario {
  return {
    name,
    what,
    world: name,
    rateLimit,
    trials,
    async trial(world, index, random, settings) {
      const count = settings.ci ? size.ci : size.full;
      const subs = await burst(world.daemon, `${name}-${index}`, count, random, [0, 20]);
      // The bucket alone makes this take count / refill seconds: the deadline allows 4 times that.
      const deadlineMs = Math.max(settings.deadlineMs, (4000 * count) / rateLimit.refillPerSecond);
      const verdict = await judge(world.daemon, world.jobs, subs, Date.now(), deadlineMs);
      return { verdict, subs };
    },
  };
}

/** The external Redis killed during a burst and started again after a few seconds; the daemon is not restarted. */
function redisScenario(name: string, what: string, keepData: boolean): Scenario {
  return {
    name,
    what,
    world: name,
    externalRedis: true,
    trials: (n, s) => (s.ci ? 1 : n),
    async trial(world, index, random, settings) {
      const redis = world.redis as ExternalRedis;
      const subs = await burstWithFault(world, `${name}-${index}`, BURST, random, () => redis.kill());
      await sleep(random.int(3000, settings.ci ? 4000 : 15_000));
      await redis.restart(keepData);
      const verdict = await judge(world.daemon, world.jobs, subs, Date.now(), settings.deadlineMs);
      return { verdict, subs };
    },
  };
}

/** A signal during a burst: how long the shutdown takes and which steps ran; then a restart finishes the work. */
function signalScenario(name: string, what: string, signal: 'SIGTERM' | 'SIGINT', group: boolean): Scenario {
  return {
    name,
    what,
    world: 'signals',
    logLevel: 'debug',
    // A slow proxy (every request 400 ms), so submits are under way when the signal lands: a
    // shutdown with nothing to wait for proves little.
    upstreamLatencyMs: 400,
    trials: (n, s) => (s.ci ? 1 : n),
    async trial(world, index, random, settings) {
      let shutdown: ShutdownReport | undefined;
      const subs = await burstWithFault(world, `${name}-${index}`, BURST, random, async () => {
        shutdown = await world.daemon.signal(signal, group, settings.shutdownWaitMs);
      });
      const restartAt = Date.now();
      await world.daemon.start();
      const verdict = await judge(world.daemon, world.jobs, subs, restartAt, settings.deadlineMs);
      return { verdict, subs, shutdown };
    },
  };
}

export const SCENARIOS: Scenario[] = [
  killScenario('kill9-daemon', 'kill -9 of the daemon during a burst of 10, then a restart', async (w) =>
    w.daemon.kill9(),
  ),
  killScenario(
    'kill9-private-redis',
    'kill -9 of the daemon’s private redis-server during a burst, then a daemon restart',
    async (w) => {
      w.daemon.killPrivateRedis();
      // Give the daemon a moment to notice: what it does without Redis is part of the trial.
      await sleep(2000);
    },
  ),
  outageScenario(
    'outage-short',
    'slurmctld and slurmdbd down for less than stale-if-error (20 s; CI 6 s)',
    { slurmctld: 'down', slurmdbd: 'down' },
    (s) => (s.ci ? 6000 : 20_000),
  ),
  outageScenario(
    'outage-long',
    'slurmctld and slurmdbd down for longer than stale-if-error (330 s > 300 s; not in CI; one trial per 5)',
    { slurmctld: 'down', slurmdbd: 'down' },
    () => 330_000,
    (n, s) => (s.ci ? 0 : Math.max(1, Math.floor(n / 5))),
  ),
  outageScenario('accounting-down', 'slurmdbd alone down (20 s; CI 6 s)', { slurmdbd: 'down' }, (s) =>
    s.ci ? 8000 : 20_000,
  ),
  {
    name: 'upstream-restart',
    world: 'base',
    what: 'the simulator process stopped and started again during a burst',
    trials: (n, s) => (s.ci ? 1 : n),
    async trial(world, index, random, settings) {
      const subs = await burstWithFault(world, `upstream-restart-${index}`, BURST, random, () =>
        simOf(world).restart(),
      );
      const verdict = await judge(world.daemon, world.jobs, subs, Date.now(), settings.deadlineMs);
      return { verdict, subs };
    },
  },
  stormScenario('429-bucket-1', '30 submits at once (CI 10) against a proxy bucket of 1 (1/s)', {
    capacity: 1,
    refillPerSecond: 1,
  }),
  stormScenario(
    '429-storm-100',
    '100 submits at once against a proxy bucket of 1 (1/s), as the issue measured (not in CI; one trial per 5)',
    { capacity: 1, refillPerSecond: 1 },
    { ci: 0, full: 100 },
    (n, s) => (s.ci ? 0 : Math.max(1, Math.floor(n / 5))),
  ),
  stormScenario('429-bucket-4', '30 submits at once (CI 10) against a proxy bucket of 4 (4/s)', {
    capacity: 4,
    refillPerSecond: 4,
  }),
  redisScenario('redis-restart-aof', 'external Redis kill -9, back after 3–15 s with its append-only file', true),
  redisScenario('redis-restart-empty', 'external Redis kill -9, back after 3–15 s without its data', false),
  signalScenario('sigterm', 'SIGTERM to the daemon process during a burst', 'SIGTERM', false),
  signalScenario('sigint', 'SIGINT to the daemon process during a burst', 'SIGINT', false),
  signalScenario('sigterm-group', 'SIGTERM to the daemon’s process group (a supervisor)', 'SIGTERM', true),
  signalScenario('sigint-group', 'SIGINT to the daemon’s process group (Ctrl-C in a terminal)', 'SIGINT', true),
];

/** slurmctld or slurmdbd of the real cluster killed during a burst, started again after a while. */
function slurmOutage(name: string, what: string, daemon: 'slurmctld' | 'slurmdbd'): Scenario {
  return {
    name,
    what,
    slurm: true,
    world: 'slurm',
    trials: (n) => n,
    async trial(world, index, random, settings) {
      if (!realSlurm) throw new Error('no real cluster');
      const slurm = realSlurm;
      const subs = await burstWithFault(world, `${name}-${index}`, BURST, random, () => slurm.kill(daemon));
      await sleep(20_000);
      await slurm.restore();
      const verdict = await judge(world.daemon, world.jobs, subs, Date.now(), settings.deadlineMs);
      return { verdict, subs };
    },
  };
}

/** `--slurm`: the scenarios that apply to a real cluster (one the harness cannot rate-limit or restart at will). */
export const SLURM_SCENARIOS: Scenario[] = [
  killScenario(
    'slurm-kill9-daemon',
    'kill -9 of the daemon during a burst on the real cluster, then a restart',
    async (w) => w.daemon.kill9(),
    true,
  ),
  slurmOutage('slurm-ctld-stop', 'slurmctld killed during a burst, started again after 20 s', 'slurmctld'),
  slurmOutage('slurm-dbd-stop', 'slurmdbd killed during a burst, started again after 20 s', 'slurmdbd'),
];
