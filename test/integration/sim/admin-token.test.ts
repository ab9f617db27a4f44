import { readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { bearer, http, rawGet } from '../../helpers/http.js';
import { ALICE_TOKEN, startSim, type TestSim } from '../../helpers/sim.js';
import { LLM_KEY, LLM_MODEL, llmSimConfig } from '../llm/llm-helpers.js';

/**
 * Issue 30, point 7: the simulator's `/_sim` routes answered any caller on the host (every
 * prompt its LLM endpoint received, with the job output in it; the switches that take the
 * scheduler down). Loopback is no credential: every user of the host, and every job the
 * simulator runs, is a loopback caller. They now need the simulator's admin token.
 */

/** Every `/_sim` route, each with a body it accepts. */
const ADMIN_ROUTES: { method: string; path: string; body?: unknown }[] = [
  { method: 'GET', path: '/_sim/upstream' },
  { method: 'PUT', path: '/_sim/upstream', body: { slurmctld: 'up' } },
  { method: 'PUT', path: '/_sim/users/alice', body: { maxSubmitJobs: null } },
  { method: 'POST', path: '/_sim/slurmctld/crash', body: { loseNewest: 0 } },
  { method: 'GET', path: '/_sim/stats' },
  { method: 'GET', path: '/_sim/llm' },
  { method: 'PUT', path: '/_sim/llm', body: { mode: 'ok' } },
  { method: 'GET', path: '/_sim/llm/requests' },
  { method: 'DELETE', path: '/_sim/llm/requests' },
];

const PROMPT = 'the output of job 1000: password=hunter2';

describe('the simulator admin routes need its admin token', () => {
  let sim: TestSim;

  beforeAll(async () => {
    sim = await startSim(llmSimConfig());
  });
  afterAll(async () => {
    await sim?.stop();
  });

  async function sendPrompt(): Promise<void> {
    const res = await http(`${sim.url}/v1/chat/completions`, {
      method: 'POST',
      headers: bearer(LLM_KEY),
      body: { model: LLM_MODEL, messages: [{ role: 'user', content: PROMPT }] },
    });
    expect(res.status, res.text).toBe(200);
  }

  it('GET /_sim/llm/requests without it is refused and shows no prompt', async () => {
    await sendPrompt();
    const res = await http(`${sim.url}/_sim/llm/requests`);
    expect(res.status, res.text).toBe(401);
    expect(res.text).not.toContain('hunter2');
    expect(res.headers.get('www-authenticate')).toMatch(/^Bearer /);
    // However its path is spelled: the router decodes %5F before the hook sees the route.
    for (const path of ['/%5Fsim/llm/requests', '/%5fsim/llm/%72equests']) {
      const port = Number(new URL(sim.url).port);
      const raw = await rawGet('127.0.0.1', port, path);
      expect(raw.status, path).toBe(401);
      expect(raw.body).not.toContain('hunter2');
    }
    const allowed = await http(`${sim.url}/_sim/llm/requests`, { headers: sim.admin });
    expect(allowed.status).toBe(200);
    expect(allowed.text).toContain('hunter2');
  });

  it.each(ADMIN_ROUTES)(
    '$method $path: 401 without the token, with a wrong one, or with a user token',
    async (route) => {
      for (const headers of [
        {},
        bearer('not-the-admin-token-0123456789'),
        bearer(ALICE_TOKEN),
        { authorization: 'Bearer' },
      ]) {
        const res = await http(`${sim.url}${route.path}`, { method: route.method, headers, body: route.body });
        expect(res.status, `${JSON.stringify(headers)}: ${res.text}`).toBe(401);
      }
      const res = await http(`${sim.url}${route.path}`, { method: route.method, headers: sim.admin, body: route.body });
      expect(res.status, res.text).toBe(200);
    },
  );

  it('keeps the token in the state dir, readable by its owner only, across restarts', async () => {
    const file = join(sim.stateDir, 'admin-token');
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(sim.admin).toEqual(bearer(readFileSync(file, 'utf8').trim()));
    const before = sim.admin;
    await sim.restart();
    expect(sim.admin).toEqual(before);
    expect((await http(`${sim.url}/_sim/stats`, { headers: before })).status).toBe(200);
  });
});
