import { readFileSync } from 'node:fs';
import { describe, expect, expectTypeOf, it } from 'vitest';
import type * as pgSchema from '../../src/db/pg-schema.js';
import type * as sqliteSchema from '../../src/db/schema.js';
import { PG_SCHEMA_FILE, pgSchemaSource } from '../db/pg-schema.js';

describe('src/db/pg-schema.ts', () => {
  it('is what the SQLite schema generates (run `npm run db:generate` after changing src/db/schema.ts)', () => {
    expect(readFileSync(PG_SCHEMA_FILE, 'utf8')).toBe(pgSchemaSource());
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
  });
});
