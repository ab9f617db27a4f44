import { mkdirSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { configDefaults, defineConfig } from 'vitest/config';
import LongestFirst from './test/helpers/longest-first.js';

/**
 * Files that run alone, first, one after another, while the type check (test/suite.sh) has the
 * other core: they bound how long the event loop is held or how long parsing takes, which other
 * files' work on the same 2 cores would break (a mass start written in batches, a reconcile
 * import in slices, pipeline files loaded off the event loop, step ordering in linear time).
 * With them: the UI's replayed-request page, whose pending transition carries the scheduler's
 * reason only when the first poll after the job starts waiting finds its accounting record
 * (under load it came a cycle late, and the transition is then recorded from the controller's
 * light listing, which has no reason); and the test set-up's munged check, which stops the
 * default munged that the MUNGE tests use. Run last, they left a core idle for the 20 s they
 * take; first, that core runs tsc. Every other file has its own Redis, ports, queue prefix and
 * directories, so files run side by side; the files that start `schedflow` as processes run its
 * build (test/helpers/cli-build.ts), which starts in well under a second.
 */
const SERIAL = [
  'test/integration/requests/poll-mass-start.test.ts',
  'test/integration/requests/reconcile-slices.test.ts',
  'test/unit/pipeline-set.test.ts',
  'test/unit/pipeline-limits.test.ts',
  'test/integration/ui/ui-replayed.test.ts',
  'test/integration/setup/munge-setup.test.ts',
];

/** The two-host tests (test/integration/two-hosts/): see the default project. */
const TWO_HOSTS = 'test/integration/two-hosts/**';

/**
 * Around each file: what CPU it cost (recorded for the order of the files, see the file), and no
 * child process, socket, server or timer left running (see the file). In this order: the CPU is
 * read once the leak check has waited for the file's processes to end.
 */
const EACH_FILE = ['test/helpers/file-cpu.ts', 'test/helpers/no-leaks.ts'];

/**
 * Builds schedflow once per run, for the tests that start it as a process, and starts the run's
 * PostgreSQL server, for the tests of the history on PostgreSQL (see the files).
 */
const GLOBAL_SETUP = ['test/helpers/cli-build.ts', 'test/helpers/postgres-server.ts'];

/**
 * Where the daemons the tests start register for the CLI (src/daemon-registry.ts): a folder of
 * the run's, not the user's runtime folder, where a command of theirs would find the tests'
 * daemons (and, several running, refuse to choose). Tests of the registry use folders of their own.
 */
const XDG_RUNTIME_DIR = fileURLToPath(new URL('./.tmp/xdg-runtime', import.meta.url));
mkdirSync(XDG_RUNTIME_DIR, { recursive: true, mode: 0o700 });

export default defineConfig({
  test: {
    env: { XDG_RUNTIME_DIR },
    // Four files at a time on 2 cores. Six were right when the suite cost 365 s of CPU (4:03;
    // seven 4:06, eight 4:34): its files then mostly waited on servers and processes. At 202
    // files it costs 1,300 to 1,600 s of CPU and keeps both cores busy throughout; six files
    // then ran each test several times slower than alone, and each CI run had a few tests past
    // their bounds, a different few each time. On a clean clone, four took 821 s against six's
    // 898 and 945 s, and 1,293 s of CPU against 1,576: fewer processes waiting on each other
    // spend less polling and switching. A global option: projects cannot set it.
    maxWorkers: 4,
    // As many as at most: the forks are reused from file to file (isolate: false), and a fork
    // tinypool retires as idle between files ends the run with "Terminating worker thread"
    // (vitest 3.2).
    minWorkers: 4,
    // Every project's forks run file after file without isolation: a file's modules are
    // imported once per process, not once per file (importing the daemon took 2-3 s of CPU per
    // file, about half the suite's). Every file starts and stops its own servers and processes
    // (test/helpers/no-leaks.ts checks that), and no helper keeps state a file could inherit.
    // One forks pool serves every project, so this is set here; the slurm tier asks for
    // isolation on its command line (package.json).
    poolOptions: { forks: { isolate: false } },
    // Longest files first, on a fresh clone too (see the file).
    sequence: { sequencer: LongestFirst },
    // A bound for a hang, not a speed target: on a loaded CI run six files, tsc and biome shared 2
    // cores, and a test that starts `schedflow` processes a few times went past 30 s where alone
    // it takes 3 s.
    testTimeout: 60_000,
    hookTimeout: 60_000,
    reporters: ['default'],
    projects: [
      {
        // `npm run test:unit`: pure logic. In forks like the integration files: vitest's forks
        // pool runs one project's files after another's, and a fork imports a module once for
        // all its files (isolate: false). In threads, beside the forks, each file imported its
        // modules again and took the cores while the forks waited (the suite's first 20 s ran
        // one integration file). heap-collector.test.ts measures the heap it grows itself, so
        // the other unit files' modules in its process do not matter.
        extends: true,
        test: {
          name: 'unit',
          include: ['test/unit/**/*.test.ts'],
          exclude: [...configDefaults.exclude, ...SERIAL],
          pool: 'forks',
          sequence: { groupOrder: 1 },
          setupFiles: EACH_FILE,
        },
      },
      {
        // Real Redis, SQLite, HTTP and processes; files in parallel, four processes each running
        // file after file (see poolOptions above).
        extends: true,
        test: {
          name: 'default',
          include: ['test/**/*.test.ts'],
          exclude: [
            ...configDefaults.exclude,
            'test/unit/**',
            'test/slurm/**',
            'test/package/**',
            ...SERIAL,
            // Deployments on PostgreSQL, run with the tests on PostgreSQL (`npm run test:postgres`):
            // hosts of their own with Redis, PostgreSQL and three daemons each, they were a tenth
            // of `npm test`'s four minutes.
            ...(process.env.SCHEDFLOW_TEST_HISTORY === 'postgres' ? [] : [TWO_HOSTS]),
          ],
          pool: 'forks',
          sequence: { groupOrder: 1 },
          globalSetup: GLOBAL_SETUP,
          setupFiles: EACH_FILE,
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
          // Its daemons' histories on PostgreSQL too, under `npm run test:postgres`.
          globalSetup: process.env.SCHEDFLOW_TEST_HISTORY === 'postgres' ? ['test/helpers/postgres-server.ts'] : [],
          setupFiles: EACH_FILE,
        },
      },
      {
        // `npm run test:package`: the package as `npm pack` makes it, installed with `npm install -g`
        // into a prefix of its own and started from there (see the file). Its install compiles
        // better-sqlite3 where no prebuilt binary can be fetched: minutes, so not in `npm test`.
        extends: true,
        test: {
          name: 'package',
          include: ['test/package/**/*.test.ts'],
          testTimeout: 120_000,
          hookTimeout: 1_200_000,
          poolOptions: { forks: { singleFork: true } },
        },
      },
      {
        // `npm run test:slurm`: against a real Slurm 25.11 cluster (../shared/real-slurm), built when missing.
        extends: true,
        test: {
          name: 'slurm',
          include: ['test/slurm/**/*.test.ts'],
          globalSetup: [
            'test/slurm/global-setup.ts',
            // The daemons' histories on PostgreSQL too, with SCHEDFLOW_TEST_HISTORY=postgres.
            ...(process.env.SCHEDFLOW_TEST_HISTORY === 'postgres' ? ['test/helpers/postgres-server.ts'] : []),
          ],
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
