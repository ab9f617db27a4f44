import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { IN_FLIGHT_RETRY_AFTER_SEC } from '../../../src/access/quota.js';
import { listAudit } from '../../../src/db/audit.js';
import type { History } from '../../../src/db/history.js';
import { createToken, updateToken } from '../../../src/db/tokens.js';
import { apiClient, errorOf, shellSpec } from '../../helpers/api.js';
import { startTestDaemon, type TestDaemon } from '../../helpers/daemon.js';
import { waitFor } from '../../helpers/http.js';
import { startTestRedis, type TestRedis } from '../../helpers/redis.js';
import { ALICE_TOKEN, startSim, type TestSim } from '../../helpers/sim.js';

/**
 * A token's bindings and quotas as a lab service meets them over the local API: refused at the
 * door with a code of its own (403, or 429 with Retry-After), nothing recorded for the refused
 * request, and the audit rows of what was accepted and refused.
 */

let redis: TestRedis;
let sim: TestSim;
let td: TestDaemon;
let store: History;

// The bound token's owner's pipeline: another owner's would be unknown to it (404), not refused.
const PIPELINE = ['owner: lab-bound', 'steps:', '  only:', '    script: |', '      #!/bin/sh', '      true'].join('\n');

beforeAll(async () => {
  redis = await startTestRedis();
  sim = await startSim();
  // `test` (the default: the first by name) and `zeta`, on the same simulator.
  td = await startTestDaemon(
    sim.url,
    redis.url,
    {},
    {},
    { 'greet.yaml': PIPELINE },
    {
      zeta: { token: ALICE_TOKEN, account: 'lab' },
    },
  );
  store = td.daemon.history.store;
});

afterAll(async () => {
  await td?.stop();
  await sim?.stop();
  await redis?.stop();
});

async function tokenFor(
  name: string,
  limits: { owner?: string; profiles?: string[]; maxInFlight?: number; maxPerDay?: number } = {},
) {
  return (await createToken(store, { name, owner: `lab-${name}`, scopes: ['read', 'submit', 'cancel'], ...limits }))
    .token;
}

async function requestsOf(actor: string): Promise<string[]> {
  const t = store.t.jobRequests;
  const rows = await store.all(store.db.select({ id: t.id, actor: t.actor }).from(t));
  return rows.filter((r) => r.actor === actor).map((r) => r.id);
}

const sleeper = (name: string) => ({ spec: shellSpec(name, 'sleep 120') });

describe('bindings', () => {
  it('refuses a profile the token is not bound to (the default counts) with 403, recording nothing', async () => {
    const api = apiClient(td);
    const token = await tokenFor('bound', { profiles: ['zeta'] });
    const refused = await api.call('POST', '/api/v1/jobs', { token, body: { spec: shellSpec('b', 'true') } });
    expect(refused.status).toBe(403);
    expect(errorOf(refused)).toMatchObject({
      code: 'SCHEDFLOW_ERR_PROFILE_NOT_ALLOWED',
      allowed_profiles: ['zeta'],
    });
    expect(errorOf(refused).message).toMatch(/may not use scheduler profile "test"; it is bound to: zeta/);
    const named = await api.call('POST', '/api/v1/jobs', {
      token,
      body: { profile: 'test', spec: shellSpec('b', 'true') },
    });
    expect(named.status).toBe(403);
    expect(await requestsOf('token:bound')).toEqual([]);

    // A pipeline whose steps go to `test`: no run.
    const trigger = await api.call('POST', '/api/v1/pipelines/greet/runs', { token, body: {} });
    expect(trigger.status).toBe(403);
    expect(errorOf(trigger).code).toBe('SCHEDFLOW_ERR_PROFILE_NOT_ALLOWED');
    const runs = await store.all(store.db.select().from(store.t.pipelineRuns));
    expect(runs.filter((r) => r.actor === 'token:bound')).toEqual([]);

    const allowed = await api.call('POST', '/api/v1/jobs', {
      token,
      body: { profile: 'zeta', spec: shellSpec('b', 'true') },
    });
    expect(allowed.status).toBe(201);

    // Changed without re-creating the token: its next request passes.
    await updateToken(store, 'bound', { profiles: null });
    expect((await api.call('POST', '/api/v1/jobs', { token, body: { spec: shellSpec('b', 'true') } })).status).toBe(
      201,
    );

    const audit = (await listAudit(store, { owner: 'lab-bound', limit: 20 })).reverse();
    expect(audit.map((r) => [r.action, r.outcome])).toEqual([
      ['token.create', 'ok'],
      ['request.accept', 'refused'],
      ['request.accept', 'refused'],
      ['run.trigger', 'refused'],
      ['request.accept', 'ok'],
      ['token.update', 'ok'],
      ['request.accept', 'ok'],
    ]);
    expect(audit[1]?.detail).toMatch(/^SCHEDFLOW_ERR_PROFILE_NOT_ALLOWED: /);
    const accepted = audit[4];
    expect(accepted).toMatchObject({ actor: 'token:bound', target: `request:${(allowed.json as { id: string }).id}` });
    expect(accepted?.httpRequestId).toEqual(expect.any(String));
  });
});

describe('retry-tasks', () => {
  it("counts against the token's binding and quotas, as a submission does: the original's profile", async () => {
    const api = apiClient(td);
    const token = await tokenFor('retrier', { maxInFlight: 5 });
    const spec = { name: 'arr', script: '#!/bin/sh\n[ "$SLURM_ARRAY_TASK_ID" = 1 ] && exit 4\ntrue\n', array: '0-2' };
    const made = await api.call('POST', '/api/v1/jobs', { token, body: { spec } });
    expect(made.status).toBe(201);
    const id = (made.json as { id: string }).id;
    await td.waitForState(id, 'failed', 15_000);

    await updateToken(store, 'retrier', { profiles: ['zeta'] });
    const unbound = await api.call('POST', `/api/v1/jobs/${id}/retry-tasks`, { token, body: {} });
    expect(unbound.status).toBe(403);
    expect(errorOf(unbound)).toMatchObject({ code: 'SCHEDFLOW_ERR_PROFILE_NOT_ALLOWED', allowed_profiles: ['zeta'] });

    await updateToken(store, 'retrier', { profiles: null, maxInFlight: 0 });
    const full = await api.call('POST', `/api/v1/jobs/${id}/retry-tasks`, { token, body: {} });
    expect(full.status).toBe(429);
    expect(errorOf(full).code).toBe('SCHEDFLOW_ERR_QUOTA_IN_FLIGHT');
    expect(full.headers.get('retry-after')).toBe(String(IN_FLIGHT_RETRY_AFTER_SEC));
    expect(await requestsOf('token:retrier')).toEqual([id]);

    await updateToken(store, 'retrier', { maxInFlight: 1 });
    expect((await api.call('POST', `/api/v1/jobs/${id}/retry-tasks`, { token, body: {} })).status).toBe(201);
  });
});

describe('quotas', () => {
  it('429 SCHEDFLOW_ERR_QUOTA_IN_FLIGHT past --max-in-flight, with Retry-After; an ended request frees room', async () => {
    const api = apiClient(td);
    const token = await tokenFor('inflight', { maxInFlight: 2 });
    const first = await api.call('POST', '/api/v1/jobs', { token, body: sleeper('f1') });
    const second = await api.call('POST', '/api/v1/jobs', { token, body: sleeper('f2') });
    expect([first.status, second.status]).toEqual([201, 201]);
    const third = await api.call('POST', '/api/v1/jobs', { token, body: sleeper('f3') });
    expect(third.status).toBe(429);
    expect(third.headers.get('retry-after')).toBe(String(IN_FLIGHT_RETRY_AFTER_SEC));
    expect(errorOf(third)).toMatchObject({ code: 'SCHEDFLOW_ERR_QUOTA_IN_FLIGHT', limit: 2 });
    expect(await requestsOf('token:inflight')).toHaveLength(2);

    // Another token of the same owner has quotas of its own.
    const other = await tokenFor('inflight-other', { owner: 'lab-inflight', maxInFlight: 1 });
    expect((await api.call('POST', '/api/v1/jobs', { token: other, body: sleeper('o') })).status).toBe(201);

    const id = (first.json as { id: string }).id;
    // A cancel while it is being submitted is a 409 with Retry-After: asked again until taken.
    await waitFor(
      async () =>
        [200, 202].includes((await api.call('DELETE', `/api/v1/jobs/${id}`, { token })).status) ? true : undefined,
      { timeoutMs: 20_000, what: 'the cancel to be taken' },
    );
    await waitFor(
      async () => {
        const r = await api.call('GET', `/api/v1/jobs/${id}`, { token });
        return (r.json as { state: string }).state === 'cancelled' ? true : undefined;
      },
      { timeoutMs: 20_000, what: 'the cancel' },
    );
    const fourth = await api.call('POST', '/api/v1/jobs', { token, body: sleeper('f4') });
    expect(fourth.status).toBe(201);
    const audit = await listAudit(store, { owner: 'lab-inflight', limit: 50 });
    // The quota's refusal (a cancel asked again while the job was being submitted may add its own).
    expect(
      audit.filter((r) => r.actor === 'token:inflight' && r.action === 'request.accept' && r.outcome === 'refused'),
    ).toHaveLength(1);
  });

  it('429 SCHEDFLOW_ERR_QUOTA_PER_DAY past --max-per-day, Retry-After when the oldest leaves the 24 hours', async () => {
    const api = apiClient(td);
    const token = await tokenFor('daily', { maxPerDay: 2 });
    for (const name of ['d1', 'd2']) {
      expect((await api.call('POST', '/api/v1/jobs', { token, body: { spec: shellSpec(name, 'true') } })).status).toBe(
        201,
      );
    }
    const refused = await api.call('POST', '/api/v1/jobs', { token, body: { spec: shellSpec('d3', 'true') } });
    expect(refused.status).toBe(429);
    expect(errorOf(refused)).toMatchObject({ code: 'SCHEDFLOW_ERR_QUOTA_PER_DAY', limit: 2 });
    const retryAfter = Number(refused.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThan(86_400 - 60);
    expect(retryAfter).toBeLessThanOrEqual(86_400);
    expect(await requestsOf('token:daily')).toHaveLength(2);
  });

  it('20 POSTs at once with --max-in-flight 5: exactly 5 accepted, 15 refused, 5 recorded', async () => {
    const api = apiClient(td);
    const token = await tokenFor('burst', { maxInFlight: 5 });
    const answers = await Promise.all(
      Array.from({ length: 20 }, (_, i) => api.call('POST', '/api/v1/jobs', { token, body: sleeper(`b${i}`) })),
    );
    const statuses = answers.map((a) => a.status);
    expect(statuses.filter((s) => s === 201)).toHaveLength(5);
    expect(statuses.filter((s) => s === 429)).toHaveLength(15);
    expect(await requestsOf('token:burst')).toHaveLength(5);
    const audit = await listAudit(store, { owner: 'lab-burst', limit: 50 });
    expect(audit.filter((r) => r.action === 'request.accept' && r.outcome === 'ok')).toHaveLength(5);
    expect(audit.filter((r) => r.action === 'request.accept' && r.outcome === 'refused')).toHaveLength(15);
  });
});
