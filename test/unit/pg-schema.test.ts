import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import {
  type DrizzleSnapshotJSON,
  type DrizzleSQLiteSnapshotJSON,
  generateDrizzleJson,
  generateMigration,
  generateSQLiteDrizzleJson,
  generateSQLiteMigration,
} from 'drizzle-kit/api';
import { describe, expect, expectTypeOf, it } from 'vitest';
import * as pgSchema from '../../src/db/pg-schema.js';
import * as sqliteSchema from '../../src/db/schema.js';
import { PG_SCHEMA_FILE, pgSchemaSource } from '../db/pg-schema.js';
import { REPO } from '../helpers/cli-process.js';

/** The snapshot drizzle-kit wrote with a dialect's last migration: the schema its migrations make. */
function lastSnapshot<T>(dialect: 'sqlite' | 'postgres'): T {
  const meta = join(REPO, 'migrations', dialect, 'meta');
  const last = readdirSync(meta)
    .filter((name) => name.endsWith('_snapshot.json'))
    .sort()
    .at(-1) as string;
  return JSON.parse(readFileSync(join(meta, last), 'utf8')) as T;
}

describe('src/db/pg-schema.ts', () => {
  it('is what the SQLite schema generates (run `npm run db:generate` after changing src/db/schema.ts)', () => {
    expect(readFileSync(PG_SCHEMA_FILE, 'utf8')).toBe(pgSchemaSource());
  });

  it('is what the committed migrations make, on both databases (run `npm run db:generate`)', async () => {
    const sqlite = lastSnapshot<DrizzleSQLiteSnapshotJSON>('sqlite');
    const sqliteNow = await generateSQLiteDrizzleJson(sqliteSchema as Record<string, unknown>, sqlite.id);
    expect(await generateSQLiteMigration(sqlite, sqliteNow)).toEqual([]);
    const postgres = lastSnapshot<DrizzleSnapshotJSON>('postgres');
    const postgresNow = generateDrizzleJson(pgSchema as Record<string, unknown>, postgres.id);
    expect(await generateMigration(postgres, postgresNow)).toEqual([]);
  });

  it('gives every table the same row type as the SQLite schema', () => {
    // Checked by the type check: a row read from either database is the same value to the code.
    expectTypeOf<typeof pgSchema.jobRequests.$inferSelect>().toEqualTypeOf<sqliteSchema.JobRequestRow>();
    expectTypeOf<typeof pgSchema.jobTransitions.$inferSelect>().toEqualTypeOf<sqliteSchema.JobTransitionRow>();
    expectTypeOf<typeof pgSchema.arrayTasks.$inferSelect>().toEqualTypeOf<sqliteSchema.ArrayTaskRow>();
    expectTypeOf<typeof pgSchema.pipelineRuns.$inferSelect>().toEqualTypeOf<sqliteSchema.PipelineRunRow>();
    expectTypeOf<typeof pgSchema.pipelineSchedules.$inferSelect>().toEqualTypeOf<sqliteSchema.PipelineScheduleRow>();
    expectTypeOf<typeof pgSchema.deadlineMisses.$inferSelect>().toEqualTypeOf<sqliteSchema.DeadlineMissRow>();
    expectTypeOf<typeof pgSchema.apiTokens.$inferSelect>().toEqualTypeOf<sqliteSchema.ApiTokenRow>();
    expectTypeOf<typeof pgSchema.requestReplays.$inferSelect>().toEqualTypeOf<sqliteSchema.RequestReplayRow>();
    expectTypeOf<typeof pgSchema.webhookDeliveries.$inferSelect>().toEqualTypeOf<sqliteSchema.WebhookDeliveryRow>();
    expectTypeOf<typeof pgSchema.accountingJobs.$inferSelect>().toEqualTypeOf<sqliteSchema.AccountingJobRow>();
    expectTypeOf<typeof pgSchema.summaries.$inferSelect>().toEqualTypeOf<sqliteSchema.SummaryRow>();
    expectTypeOf<typeof pgSchema.clusterSamples.$inferSelect>().toEqualTypeOf<sqliteSchema.ClusterSampleRow>();
    expectTypeOf<typeof pgSchema.idempotencyKeys.$inferSelect>().toEqualTypeOf<
      typeof sqliteSchema.idempotencyKeys.$inferSelect
    >();
    expectTypeOf<typeof pgSchema.llmUsage.$inferSelect>().toEqualTypeOf<typeof sqliteSchema.llmUsage.$inferSelect>();
    expectTypeOf<typeof pgSchema.profileSync.$inferSelect>().toEqualTypeOf<
      typeof sqliteSchema.profileSync.$inferSelect
    >();
    expectTypeOf<typeof pgSchema.historyMeta.$inferSelect>().toEqualTypeOf<
      typeof sqliteSchema.historyMeta.$inferSelect
    >();
    // And the same values to write.
    expectTypeOf<typeof pgSchema.jobRequests.$inferInsert>().toEqualTypeOf<
      typeof sqliteSchema.jobRequests.$inferInsert
    >();
    expectTypeOf<typeof pgSchema.jobTransitions.$inferInsert>().toEqualTypeOf<
      typeof sqliteSchema.jobTransitions.$inferInsert
    >();
    expectTypeOf<typeof pgSchema.accountingJobs.$inferInsert>().toEqualTypeOf<
      typeof sqliteSchema.accountingJobs.$inferInsert
    >();
    expectTypeOf<typeof pgSchema.summaries.$inferInsert>().toEqualTypeOf<typeof sqliteSchema.summaries.$inferInsert>();
  });
});
