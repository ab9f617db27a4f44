import { parseArgs } from 'node:util';

export interface SoakOptions {
  minutes: number;
  /** Minutes between report rows. */
  every: number;
  /** Minutes between faults. */
  faultEvery: number;
  postgres: boolean;
  seed: number;
  keep: boolean;
  /** API submissions per minute (the steady stream; arrays, cancels and retries come on top). */
  rate: number;
}

export const USAGE = `npm run soak -- [--minutes N] [--every M] [--postgres] [--seed S] [--keep] [--fault-every F] [--rate R]
  --minutes N      how long the traffic runs (default 60); a drain of up to 3 minutes follows
  --every M        minutes between report rows (default 10)
  --postgres       the history on PostgreSQL (a private server, as the test suite starts one) instead of SQLite
  --seed S         seed of the faults' order and the traffic's gaps (default: random; printed; the
                   order replays, the timings vary with the machine)
  --keep           keep the temp dirs (daemon log, history, simulator state)
  --fault-every F  minutes between faults (default: N/6, at least 1, at most 3)
  --rate R         steady API submissions per minute (default 30)`;

function positive(name: string, raw: string | undefined, fallback: number): number {
  if (raw === undefined) return fallback;
  const value = Number(raw);
  if (!Number.isFinite(value) || value <= 0) throw new Error(`--${name} must be a number > 0, not ${raw}`);
  return value;
}

export function parseSoakOptions(argv: string[]): SoakOptions & { help: boolean } {
  const { values } = parseArgs({
    args: argv,
    options: {
      minutes: { type: 'string' },
      every: { type: 'string' },
      'fault-every': { type: 'string' },
      rate: { type: 'string' },
      postgres: { type: 'boolean', default: false },
      seed: { type: 'string' },
      keep: { type: 'boolean', default: false },
      help: { type: 'boolean', short: 'h', default: false },
    },
    strict: true,
  });
  const minutes = positive('minutes', values.minutes, 60);
  const every = positive('every', values.every, 10);
  if (every > minutes) throw new Error(`--every (${every}) must not be longer than --minutes (${minutes})`);
  const faultEvery = positive('fault-every', values['fault-every'], Math.max(1, Math.min(3, minutes / 6)));
  const seed = values.seed === undefined ? Math.floor(Math.random() * 2 ** 31) : Number(values.seed);
  if (!Number.isInteger(seed)) throw new Error(`--seed must be a whole number, not ${values.seed}`);
  return {
    minutes,
    every,
    faultEvery,
    rate: positive('rate', values.rate, 30),
    postgres: values.postgres ?? false,
    seed,
    keep: values.keep ?? false,
    help: values.help ?? false,
  };
}
