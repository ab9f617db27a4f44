import { configDefaults, defineConfig } from 'vitest/config';

/**
 * Files that must run alone: they bound how long the event loop is held or how long parsing
 * takes (a few hundred milliseconds to seconds), which other files' work on the same 2 cores
 * would break. Every other file has its own Redis, ports, queue prefix and directories, so
 * files run side by side.
 */
const SERIAL = [
  'test/integration/tracking/poll-mass-end.test.ts',
  'test/integration/tracking/reconcile-slices.test.ts',
  'test/unit/pipeline-set.test.ts',
  'test/unit/pipeline-limits.test.ts',
  'test/unit/heap-collector.test.ts',
];

/** After each file: no child process, socket, server or timer left running (see the file). */
const NO_LEAKS = ['test/helpers/no-leaks.ts'];

export default defineConfig({
  test: {
    // Integration files mostly wait on real servers and processes, not the CPU: three at a
    // time on 2 cores (four starved the files that spawn `schedflow` through tsx). A global
    // option: projects cannot set it.
    maxWorkers: 3,
    minWorkers: 1,
    testTimeout: 30_000,
    hookTimeout: 30_000,
    reporters: ['default'],
    projects: [
      {
        // `npm run test:unit`: pure logic, in threads, all cores.
        extends: true,
        test: {
          name: 'unit',
          include: ['test/unit/**/*.test.ts'],
          exclude: [...configDefaults.exclude, ...SERIAL],
          pool: 'threads',
          sequence: { groupOrder: 1 },
          setupFiles: NO_LEAKS,
        },
      },
      {
        // Real Redis, SQLite, HTTP and processes; one process per file, files in parallel.
        extends: true,
        test: {
          name: 'default',
          include: ['test/**/*.test.ts'],
          exclude: [...configDefaults.exclude, 'test/unit/**', 'test/slurm/**', ...SERIAL],
          pool: 'forks',
          sequence: { groupOrder: 1 },
          setupFiles: NO_LEAKS,
        },
      },
      {
        // First, before the others start: one process, one file after another.
        extends: true,
        test: {
          name: 'serial',
          include: SERIAL,
          pool: 'forks',
          poolOptions: { forks: { singleFork: true } },
          sequence: { groupOrder: 0 },
          setupFiles: NO_LEAKS,
        },
      },
      {
        // `npm run test:slurm`: against a real Slurm 25.11 cluster (../shared/real-slurm), built when missing.
        extends: true,
        test: {
          name: 'slurm',
          include: ['test/slurm/**/*.test.ts'],
          globalSetup: ['test/slurm/global-setup.ts'],
          // Real jobs take real time: a time limit is whole minutes, MinJobAge a minute.
          testTimeout: 240_000,
          hookTimeout: 900_000,
          // One at a time: the tests share the one cluster.
          poolOptions: { forks: { singleFork: true } },
        },
      },
    ],
  },
});
