import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { IN_FLIGHT_RETRY_AFTER_SEC, QUOTA_DAY_MS } from '../../../src/access/quota.js';
import { listAudit } from '../../../src/db/audit.js';
import type { History } from '../../../src/db/history.js';
import { commitEach } from '../../../src/db/shared-commit.js';
import { createToken, listTokens, revokeToken, updateToken } from '../../../src/db/tokens.js';
import { AdmissionRefusedError } from '../../../src/errors.js';
import { type RequestToRecord, recordRequest } from '../../../src/requests/accept.js';
import { transition } from '../../../src/requests/transition.js';
import { DIALECTS, testHistories } from '../../helpers/histories.js';

/**
 * A token's bindings and quotas, counted in the transaction that records the request, and the
 * audit rows of token changes and accepted requests: on SQLite and on PostgreSQL.
 */

const histories = testHistories();

function requestOf(token: string, at: number, more: Partial<RequestToRecord> = {}): RequestToRecord {
  return {
    id: randomUUID(),
    profile: 'test',
    name: 'q',
    spec: { name: 'q', script: '#!/bin/sh\ntrue\n' },
    origin: 'api',
    owner: 'lab-a',
    actor: `token:${token}`,
    at,
    source: 'api',
    ...more,
  };
}

async function requestCount(h: History): Promise<number> {
  return (await h.all(h.db.select({ id: h.t.jobRequests.id }).from(h.t.jobRequests))).length;
}

/** Records each in a transaction of its own: the outcome of each, refusals as their code. */
function settle(calls: Promise<unknown>[]): Promise<string[]> {
  return Promise.all(
    calls.map((call) =>
      call.then(
        () => 'ok',
        (error: unknown) => (error instanceof AdmissionRefusedError ? error.code : String(error)),
      ),
    ),
  );
}

describe.each(DIALECTS)('token quotas on %s', (dialect) => {
  it('writes token.create, token.update and token.revoke audit rows saying what changed, never the token', async () => {
    const h = await histories.make(dialect);
    const { token } = await createToken(h, {
      name: 'lims-a',
      owner: 'lab-a',
      scopes: ['read', 'submit'],
      profiles: ['test'],
      maxInFlight: 5,
      audit: { actor: 'cli:alice' },
    });
    const updated = await updateToken(
      h,
      'lims-a',
      { owner: 'lab-b', profiles: null, maxPerDay: 100, maxInFlight: null },
      { audit: { actor: 'cli:alice' } },
    );
    expect(updated).toMatchObject({ owner: 'lab-b', profiles: null, maxInFlight: null, maxPerDay: 100 });
    expect((await listTokens(h))[0]).toMatchObject({ owner: 'lab-b', maxPerDay: 100 });
    expect(await updateToken(h, 'nobody', { owner: 'x' })).toBeNull();
    expect(await revokeToken(h, 'lims-a', Date.now(), { actor: 'cli:bob' })).toBe(true);
    expect(await updateToken(h, 'lims-a', { owner: 'x' }), 'a revoked token is not changed').toBeNull();

    const rows = (await listAudit(h, { limit: 10 })).reverse();
    expect(rows.map((r) => [r.action, r.actor, r.owner, r.target, r.outcome])).toEqual([
      ['token.create', 'cli:alice', 'lab-a', 'token:lims-a', 'ok'],
      ['token.update', 'cli:alice', 'lab-b', 'token:lims-a', 'ok'],
      ['token.revoke', 'cli:bob', 'lab-b', 'token:lims-a', 'ok'],
    ]);
    expect(rows[0]?.detail).toBe('owner=lab-a scopes=read,submit profiles=test max_in_flight=5 max_per_day=none');
    expect(rows[1]?.detail).toBe(
      'owner: lab-a -> lab-b; profiles: test -> any; max_in_flight: 5 -> none; max_per_day: none -> 100',
    );
    expect(JSON.stringify(rows)).not.toContain(token);
  });

  it('never accepts more than --max-in-flight, however many are recorded at once', async () => {
    const h = await histories.make(dialect);
    await createToken(h, { name: 'lims-a', owner: 'lab-a', scopes: ['submit'], maxInFlight: 5 });
    const at = Date.now();
    let outcomes: string[];
    if (dialect === 'sqlite') {
      // As the API's submissions of one turn are: one commit, a savepoint each.
      const settled = await commitEach(
        h,
        Array.from({ length: 20 }, () => (tx: History) => recordRequest(tx, requestOf('lims-a', at))),
      );
      outcomes = settled.map((o) =>
        o.ok ? 'ok' : o.error instanceof AdmissionRefusedError ? o.error.code : String(o.error),
      );
    } else {
      // Four connections, as several web processes (or hosts), each with transactions at once.
      const handles = [h, await histories.again(h), await histories.again(h), await histories.again(h)];
      outcomes = await settle(
        Array.from({ length: 20 }, (_, i) =>
          (handles[i % handles.length] as History).transaction((tx) => recordRequest(tx, requestOf('lims-a', at))),
        ),
      );
    }
    expect(outcomes.filter((o) => o === 'ok')).toHaveLength(5);
    expect(outcomes.filter((o) => o === 'SCHEDFLOW_ERR_QUOTA_IN_FLIGHT')).toHaveLength(15);
    expect(await requestCount(h)).toBe(5);
  });

  it('counts lost requests as in flight, ended ones not: a request ending frees room', async () => {
    const h = await histories.make(dialect);
    await createToken(h, { name: 'lims-a', owner: 'lab-a', scopes: ['submit'], maxInFlight: 2 });
    const first = requestOf('lims-a', 1000);
    const second = requestOf('lims-a', 1001);
    await recordRequest(h, first);
    await recordRequest(h, second);
    const refused = await recordRequest(h, requestOf('lims-a', 1002)).catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(AdmissionRefusedError);
    expect(refused).toMatchObject({
      code: 'SCHEDFLOW_ERR_QUOTA_IN_FLIGHT',
      retryAfterSec: IN_FLIGHT_RETRY_AFTER_SEC,
      extra: { limit: 2 },
    });
    // Another token's, and a pipeline step of this one's, are not counted against it.
    await createToken(h, { name: 'lims-b', owner: 'lab-a', scopes: ['submit'], maxInFlight: 1 });
    await recordRequest(h, requestOf('lims-b', 1003));
    await recordRequest(h, requestOf('lims-a', 1004, { runId: randomUUID(), step: 's', attempt: 1 }));
    await transition(h, first.id, { to: 'lost', source: 'poll', at: 2000 });
    await expect(recordRequest(h, requestOf('lims-a', 2001))).rejects.toMatchObject({
      code: 'SCHEDFLOW_ERR_QUOTA_IN_FLIGHT',
    });
    await transition(h, second.id, { to: 'cancelled', source: 'api', at: 3000 });
    expect(await recordRequest(h, requestOf('lims-a', 3001))).toBe(true);
    // Raised without re-creating the token: from the next request on.
    await updateToken(h, 'lims-a', { maxInFlight: null });
    expect(await recordRequest(h, requestOf('lims-a', 3002))).toBe(true);
  });

  it('refuses past --max-per-day until the oldest counted request leaves the 24 hours', async () => {
    const h = await histories.make(dialect);
    await createToken(h, { name: 'lims-a', owner: 'lab-a', scopes: ['submit'], maxPerDay: 2 });
    const t0 = 10_000_000;
    await recordRequest(h, requestOf('lims-a', t0));
    await recordRequest(h, requestOf('lims-a', t0 + 1000));
    const refused = await recordRequest(h, requestOf('lims-a', t0 + 5000)).catch((e: unknown) => e);
    expect(refused).toMatchObject({
      code: 'SCHEDFLOW_ERR_QUOTA_PER_DAY',
      retryAfterSec: (QUOTA_DAY_MS - 5000) / 1000,
      extra: { limit: 2 },
    });
    expect(await requestCount(h)).toBe(2);
    // Ended requests still count: the quota is of requests accepted.
    expect(await recordRequest(h, requestOf('lims-a', t0 + QUOTA_DAY_MS + 1))).toBe(true);
  });

  it('refuses a profile the token is not bound to; the same id again is not a new request', async () => {
    const h = await histories.make(dialect);
    await createToken(h, { name: 'lims-a', owner: 'lab-a', scopes: ['submit'], profiles: ['zeta'], maxInFlight: 1 });
    await expect(recordRequest(h, requestOf('lims-a', 1000))).rejects.toMatchObject({
      code: 'SCHEDFLOW_ERR_PROFILE_NOT_ALLOWED',
      extra: { allowed_profiles: ['zeta'] },
    });
    const one = requestOf('lims-a', 1000, { profile: 'zeta' });
    expect(await recordRequest(h, one)).toBe(true);
    // A replay (an Idempotency-Key, a crash's retry) records nothing new: no quota to pass.
    expect(await recordRequest(h, one)).toBe(false);
    expect(await requestCount(h)).toBe(1);
  });

  it('writes request.accept with the request, and neither when its transaction rolls back', async () => {
    const h = await histories.make(dialect);
    // As acceptSubmission asks for it: the row of the request it records.
    const accepted = (r: RequestToRecord, httpRequestId: string): RequestToRecord => ({
      ...r,
      audit: {
        at: r.at,
        actor: r.actor as string,
        owner: r.owner,
        action: 'request.accept',
        target: `request:${r.id}`,
        outcome: 'ok',
        httpRequestId,
      },
    });
    const kept = accepted(requestOf('lims-a', 1000), 'req-1');
    await recordRequest(h, kept);
    const undone = accepted(requestOf('lims-a', 1001), 'req-2');
    await expect(
      h.transaction(async (tx) => {
        await recordRequest(tx, undone);
        throw new Error('the caller failed after recording');
      }),
    ).rejects.toThrow(/caller failed/);
    expect(await requestCount(h)).toBe(1);
    const rows = await listAudit(h, { limit: 10 });
    expect(rows.map((r) => [r.action, r.actor, r.owner, r.target, r.outcome, r.httpRequestId])).toEqual([
      ['request.accept', 'token:lims-a', 'lab-a', `request:${kept.id}`, 'ok', 'req-1'],
    ]);
  });
});
