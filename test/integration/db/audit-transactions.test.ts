import { Queue } from 'bullmq';
import { sql } from 'drizzle-orm';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listAudit } from '../../../src/db/audit.js';
import type { History } from '../../../src/db/history.js';
import { getRequest, insertRequest } from '../../../src/db/requests.js';
import { NoSuggestionError } from '../../../src/errors.js';
import { createLogger } from '../../../src/logger.js';
import { cancelRequest } from '../../../src/requests/canceller.js';
import { ClientRegistry } from '../../../src/sched/client-registry.js';
import { applySuggestion } from '../../../src/summaries/resubmit.js';
import { DIALECTS, testHistories } from '../../helpers/histories.js';
import { startTestRedis, type TestRedis } from '../../helpers/redis.js';

/**
 * Issue 33: an action's audit row is written in the action's own transaction, on SQLite and on
 * PostgreSQL. An audit log that refuses the row (a trigger here) undoes the action with it, so
 * no action is ever done without its row, and no `ok` row is ever left by an undone action.
 */

const histories = testHistories();
const logger = createLogger({ level: 'silent' });
let redis: TestRedis;
let submitQueue: Queue;

beforeAll(async () => {
  redis = await startTestRedis();
  submitQueue = new Queue('submit', { connection: { url: redis.url }, prefix: `audit-tx-${process.pid}` });
});
afterAll(async () => {
  await submitQueue?.close();
  await redis?.stop();
});

/** From now on every insert into the audit log fails, as a full disk or a lost connection would. */
async function auditLogRefuses(h: History): Promise<void> {
  if (h.dialect === 'sqlite') {
    (h.db as unknown as { run(s: unknown): unknown }).run(
      sql.raw(
        `CREATE TRIGGER audit_refuses BEFORE INSERT ON audit_log BEGIN SELECT RAISE(ABORT, 'audit log refuses'); END`,
      ),
    );
    return;
  }
  await h.rows(
    sql.raw(
      `CREATE FUNCTION audit_refuses() RETURNS trigger AS $$ BEGIN RAISE EXCEPTION 'audit log refuses'; END $$ LANGUAGE plpgsql`,
    ),
  );
  await h.rows(
    sql.raw('CREATE TRIGGER audit_refuses BEFORE INSERT ON audit_log FOR EACH ROW EXECUTE FUNCTION audit_refuses()'),
  );
}

async function seedRequest(h: History, id: string, withSuggestion: boolean): Promise<void> {
  await insertRequest(h, {
    id,
    profile: 'test',
    name: `job-${id}`,
    spec: { name: `job-${id}`, script: '#!/bin/sh\ntrue\n', memory_per_node: '1G' },
    origin: 'api',
    owner: 'lab-a',
    actor: 'token:lims-a',
    at: 1000,
    source: 'api',
  });
  if (!withSuggestion) return;
  await h.run(
    h.db.insert(h.t.summaries).values({
      id: `summary-${id}`,
      requestId: id,
      state: 'ready',
      suggestion: { changes: { memory_per_node: '4G' }, previous: { memory_per_node: '1G' }, why: 'ran out of memory' },
      createdAt: 1000,
      updatedAt: 1000,
    }),
  );
}

const cancelDeps = (h: History) => ({
  store: h,
  submitQueue,
  // A request never submitted: the cancel asks no scheduler.
  clients: new ClientRegistry(new Map(), logger),
  logger,
});
const by = { source: 'api' as const, who: 'API token "ops"', audit: { actor: 'token:ops', httpRequestId: 'req-1' } };

describe.each(DIALECTS)('audit rows in the action’s transaction on %s', (dialect) => {
  it('a cancel before submission: one ok row with the cancel; undone with it when the row cannot be written', async () => {
    const h = await histories.make(dialect);
    await seedRequest(h, 'r1', false);
    await seedRequest(h, 'r2', false);

    const done = await cancelRequest(cancelDeps(h), 'r1', by);
    expect(done.kind).toBe('cancelled');
    const rows = await listAudit(h, { limit: 10 });
    expect(rows).toEqual([
      expect.objectContaining({
        actor: 'token:ops',
        owner: 'lab-a',
        action: 'request.cancel',
        target: 'request:r1',
        outcome: 'ok',
        httpRequestId: 'req-1',
      }),
    ]);

    await auditLogRefuses(h);
    await expect(cancelRequest(cancelDeps(h), 'r2', by)).rejects.toThrow(/audit log refuses|audit_log/);
    // Undone: still accepted, no transition to cancelled, and no row beside the first.
    expect((await getRequest(h, 'r2'))?.state).toBe('accepted');
    expect(await listAudit(h, { limit: 10 })).toHaveLength(1);
  });

  it('a re-submission with the suggestion: one ok row with the new request; a refusal alone; undone with its row', async () => {
    const h = await histories.make(dialect);
    await seedRequest(h, 'orig', true);
    await seedRequest(h, 'bare', false);
    await seedRequest(h, 'undone', true);
    const audit = { actor: 'cli:alice', httpRequestId: 'req-2', origin: 'cli' as const };

    const made = await applySuggestion(h, { requestId: 'orig', newRequestId: 'new-1', at: 2000, ...audit });
    expect(made).toEqual({ requestId: 'new-1', created: true });
    await expect(
      applySuggestion(h, { requestId: 'bare', newRequestId: 'new-2', at: 2000, ...audit }),
    ).rejects.toBeInstanceOf(NoSuggestionError);
    const rows = await listAudit(h, { action: 'request.resubmit', limit: 10 });
    expect(rows.map((r) => [r.target, r.owner, r.outcome, r.actor, r.httpRequestId])).toEqual([
      ['request:bare', 'lab-a', 'refused', 'cli:alice', 'req-2'],
      ['request:orig', 'lab-a', 'ok', 'cli:alice', 'req-2'],
    ]);
    expect(rows[1]?.detail).toBe('as request new-1: memory_per_node=4G');

    await auditLogRefuses(h);
    await expect(
      applySuggestion(h, { requestId: 'undone', newRequestId: 'new-3', at: 2000, ...audit }),
    ).rejects.toThrow(/audit log refuses|audit_log/);
    expect(await getRequest(h, 'new-3')).toBeUndefined();
    expect(await listAudit(h, { limit: 10 })).toHaveLength(2);
  });
});
