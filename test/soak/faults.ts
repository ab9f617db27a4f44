import { sleep } from '../chaos/processes.js';
import type { Random } from '../chaos/random.js';
import type { SoakWorld } from './world.js';

/** One fault the soak made, for the report. */
export interface FaultRecord {
  name: string;
  at: number;
  durationMs: number;
  error?: string;
}

interface Fault {
  name: string;
  /** Makes the fault and ends it (the world is whole again when it resolves). */
  run(world: SoakWorld, random: Random, spanMs: number): Promise<void>;
}

/**
 * The faults, taken in turn (the rotation starts at a seeded place): what a box that runs for
 * months meets. Each lasts a part of the gap between faults, so they never overlap.
 */
const FAULTS: Fault[] = [
  {
    name: 'daemon kill -9',
    async run(world, random) {
      await world.daemon.kill9();
      // A supervisor's restart delay.
      await sleep(random.int(1000, 5000));
      await world.daemon.start();
    },
  },
  {
    name: 'redis restart',
    async run(world, random) {
      await world.redis.kill();
      await sleep(random.int(3000, 10_000));
      await world.redis.restart(true);
    },
  },
  {
    name: 'upstream outage',
    async run(world, random, spanMs) {
      // slurmctld and slurmdbd behind the proxy both down; shorter than the proxy's stale-if-error (300 s).
      await world.sim.setUpstream({ slurmctld: 'down', slurmdbd: 'down' });
      await sleep(Math.min(random.int(30_000, 60_000), spanMs / 2));
      await world.sim.setUpstream({ slurmctld: 'up', slurmdbd: 'up' });
    },
  },
  {
    name: '429 storm',
    async run(world, random, spanMs) {
      const ms = Math.min(random.int(20_000, 40_000), spanMs / 2);
      world.proxy.storm(ms, random.int(1, 3));
      await sleep(ms);
    },
  },
];

/**
 * Makes a fault every `everyMs` until `untilMs`, each the next in turn, adding each to
 * `records` as it starts (the report's rows show them as they come); resolves when the last has ended.
 */
export async function runFaults(
  world: SoakWorld,
  random: Random,
  everyMs: number,
  untilMs: number,
  records: FaultRecord[],
  log: (line: string) => void,
): Promise<void> {
  let turn = random.int(0, FAULTS.length - 1);
  for (let next = Date.now() + everyMs; next + everyMs / 2 < untilMs; next += everyMs) {
    await sleep(Math.max(0, next - Date.now()));
    const fault = FAULTS[turn++ % FAULTS.length] as Fault;
    const record: FaultRecord = { name: fault.name, at: Date.now(), durationMs: 0 };
    records.push(record);
    log(`fault: ${fault.name}`);
    try {
      await fault.run(world, random, everyMs);
    } catch (error) {
      record.error = (error as Error).message;
      log(`fault ${fault.name} went wrong: ${record.error}`);
      // Whatever it did, the world must be whole for the rest of the run.
      await world.sim.setUpstream({ slurmctld: 'up', slurmdbd: 'up' }).catch(() => {});
      if (!world.daemon.proc?.alive()) await world.daemon.start().catch(() => {});
    }
    record.durationMs = Date.now() - record.at;
  }
}
