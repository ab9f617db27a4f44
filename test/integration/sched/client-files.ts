import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { pino } from 'pino';
import { afterAll, beforeAll } from 'vitest';
import { SchedClient } from '../../../src/sched/client.js';
import { jobSpecSchema } from '../../../src/sched/job-spec.js';
import { type ProfileInput, parseProfile } from '../../../src/sched/profile.js';
import { ALICE_TOKEN, startSim, type TestSim } from '../../helpers/sim.js';

/** What the files of the scheduler client against a simulator (client*.test.ts) share. */

/** A logger whose lines the test can read (to see retries), silent otherwise. */
function recordingLogger() {
  const lines: { msg: string; [key: string]: unknown }[] = [];
  const logger = pino({ level: 'debug' }, { write: (line: string) => lines.push(JSON.parse(line)) });
  return { logger, lines };
}

export let sim: TestSim;
export let tmp: string;
/** Closed after the file. */
export const clients: SchedClient[] = [];

export function profile(overrides: Partial<ProfileInput> = {}, url = sim.url) {
  return parseProfile('test', {
    url,
    auth: { type: 'bearer', tokenEnv: 'SCHED_TOKEN' },
    account: 'lab',
    retries: { attempts: 2, baseDelayMs: 50, maxDelayMs: 200 },
    ...overrides,
  });
}

export async function connect(overrides: Partial<ProfileInput> = {}, token = ALICE_TOKEN, url = sim.url) {
  const { logger, lines } = recordingLogger();
  const client = await SchedClient.connect(profile(overrides, url), { logger, env: { SCHED_TOKEN: token } });
  clients.push(client);
  return Object.assign(client, { logLines: lines });
}

export function spec(overrides: Record<string, unknown> = {}) {
  return jobSpecSchema.parse({
    name: 'client-test',
    script: '#!/bin/sh\nsleep 0.2\n',
    current_working_directory: sim.workDir,
    ...overrides,
  });
}

/** One simulator serving every version for the file; it and the clients connected are closed after it. */
export function clientFile(): void {
  beforeAll(async () => {
    sim = await startSim({ versions: ['v0.0.42', 'v0.0.43', 'v0.0.44'] });
    tmp = mkdtempSync(join(tmpdir(), 'schedflow-client-'));
  });

  afterAll(async () => {
    // splice: files share this module when they share a process (isolate: false).
    await Promise.all(clients.splice(0).map((c) => c.close()));
    await sim.stop();
    rmSync(tmp, { recursive: true, force: true });
  });
}
