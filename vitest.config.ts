import { configDefaults, defineConfig } from 'vitest/config';

/**
 * Files that run alone, before the others start. Some bound how long the event loop is held
 * or how long parsing takes, which other files' work on the same 2 cores would break. The
 * daemon-process files start `schedflow start` through tsx again and again, with deadlines a
 * loaded machine missed. The UI's replayed-request page expects the pending transition to
 * carry the scheduler's reason, which it does only when the first poll after the job starts
 * waiting finds its accounting record (under load it could come a cycle late, and the
 * transition is then recorded from the controller's light listing, which has no reason). They share one process, so
 * test/unit/heap-collector.test.ts, which needs a heap of its own, stays in 'unit' (a thread
 * has its own). Every other file has its own Redis, ports, queue prefix and directories, so
 * files run side by side.
 */
const SERIAL = [
  'test/integration/requests/poll-mass-end.test.ts',
  'test/integration/requests/reconcile-slices.test.ts',
  'test/unit/pipeline-set.test.ts',
  'test/unit/pipeline-limits.test.ts',
  'test/integration/daemon-process/*.test.ts',
  'test/integration/ui/ui.test.ts',
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
