import type { Dialect } from './histories.js';

/**
 * The history the daemons of tests keep (test/helpers/daemon.ts, test/slurm/daemon-helpers.ts):
 * `sqlite` in their data dir, or, under `npm run test:postgres` (SCHEDFLOW_TEST_HISTORY=postgres),
 * a new database each on the run's PostgreSQL server. The same tests then run on both.
 *
 * Only what follows this setting imports this file: `npm run test:postgres` runs the files that
 * reach it (`vitest related`), since any other file would run there exactly as in `npm test`.
 */
export const TEST_HISTORY: Dialect = process.env.SCHEDFLOW_TEST_HISTORY === 'postgres' ? 'postgres' : 'sqlite';
