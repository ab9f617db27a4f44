import { parseArgs } from 'node:util';

export interface ChaosOptions {
  trials: number;
  seed: number;
  scenario?: string;
  ci: boolean;
  keep: boolean;
  slurm: boolean;
}

export const USAGE = `npm run chaos -- [--trials N] [--seed S] [--scenario NAME] [--ci] [--keep] [--slurm]
  --trials N       trials per scenario (default 3; long scenarios run fewer, see the list)
  --seed S         seed of the random fault points (default: random; printed, to replay a run)
  --scenario NAME  run one scenario (repeat or comma-separate for several)
  --ci             the CI run: 1–2 trials each, shorter outages and deadlines, world shared where
                   it can be (about 2.5 minutes when nothing fails; a failing scenario waits out its
                   deadline); exits 1 on any duplicate, lost, stuck or wrongly failed request
  --keep           keep the temp dirs (daemon logs, histories, simulator state)
  --slurm          the scenarios that apply to the real test cluster instead (cluster.sh up from
                   ../shared/real-slurm; env from $SLURM_RUN/env, /tmp/real-slurm by default):
                   daemon kill -9, slurmctld and slurmdbd killed for 20 s. It stops the cluster's
                   daemons: to leave the shared one alone, run a cluster of your own beside it with
                   SLURM_RUN=/tmp/real-slurm-b SLURM_PORT_BASE=28817 (as cluster.sh takes them)`;

export function parseOptions(argv: string[]): ChaosOptions & { scenarios?: string[]; help: boolean } {
  const { values } = parseArgs({
    args: argv,
    options: {
      trials: { type: 'string' },
      seed: { type: 'string' },
      scenario: { type: 'string', multiple: true },
      ci: { type: 'boolean', default: false },
      keep: { type: 'boolean', default: false },
      slurm: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
    strict: true,
  });
  const trials = values.trials === undefined ? 3 : Number(values.trials);
  if (!Number.isInteger(trials) || trials < 1)
    throw new Error(`--trials must be a whole number ≥ 1, not ${values.trials}`);
  const seed = values.seed === undefined ? Math.floor(Math.random() * 2 ** 31) : Number(values.seed);
  if (!Number.isInteger(seed)) throw new Error(`--seed must be a whole number, not ${values.seed}`);
  const scenarios = values.scenario
    ?.flatMap((s) => s.split(','))
    .map((s) => s.trim())
    .filter(Boolean);
  return {
    trials,
    seed,
    ci: values.ci ?? false,
    keep: values.keep ?? false,
    slurm: values.slurm ?? false,
    scenarios,
    help: values.help ?? false,
  };
}

/** A per-scenario seed, so `--scenario x --seed S` replays what scenario x did in a full run with seed S. */
export function scenarioSeed(seed: number, name: string): number {
  let h = seed >>> 0;
  for (const ch of name) h = Math.imul(h ^ ch.charCodeAt(0), 2654435761) >>> 0;
  return h;
}
