import { expect } from 'vitest';
import { jobSpecSchema } from '../../../src/sched/job-spec.js';
import { http } from '../../helpers/http.js';
import type { TestSim } from '../../helpers/sim.js';

/**
 * What the files of a daemon on a simulator (daemon-*.test.ts) share. They were one file
 * (daemon.test.ts); split, they run side by side.
 */

export function spec(s: TestSim, overrides: Record<string, unknown> = {}) {
  return jobSpecSchema.parse({
    name: 'daemon-test',
    script: '#!/bin/sh\ntrue\n',
    current_working_directory: s.workDir,
    ...overrides,
  });
}

export async function setUpstream(s: TestSim, state: Record<string, 'up' | 'down'>) {
  const res = await http(`${s.url}/_sim/upstream`, { headers: s.admin, method: 'PUT', body: state });
  expect(res.status).toBe(200);
}
