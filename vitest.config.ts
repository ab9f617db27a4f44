import { configDefaults, defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    // Integration tests start real servers and processes; one file at a time keeps ports,
    // CPU and timing predictable on a 2-core machine.
    fileParallelism: false,
    testTimeout: 30_000,
    hookTimeout: 30_000,
    reporters: ['default'],
    projects: [
      {
        extends: true,
        test: {
          name: 'default',
          include: ['test/**/*.test.ts'],
          exclude: [...configDefaults.exclude, 'test/slurm/**'],
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
        },
      },
    ],
  },
});
