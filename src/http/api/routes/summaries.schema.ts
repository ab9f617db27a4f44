import { z } from 'zod';
import { SUMMARY_KINDS, SUMMARY_STATES } from '../../../db/schema.js';
import { TRIAGE_CLASSES } from '../../../db/summary-data.js';
import { named, time } from '../shared-schemas.js';

/** A post-job summary, as the job and run routes show it (src/db/summary-data.ts holds what they store). */

const measureSchema = z.union([
  z.object({
    known: z.literal(true),
    used: z.number(),
    of: z.number(),
    percent: z.number().describe('used / of × 100, one decimal'),
  }),
  z.object({ known: z.literal(false), why: z.string() }),
]);

const efficiencySchema = z
  .object({
    cpu: measureSchema.describe('CPU time against allocated CPU time (elapsed × CPUs), seconds'),
    memory: measureSchema.describe('peak memory against requested memory, MB'),
    time: measureSchema.describe('elapsed against the time limit, seconds'),
  })
  .describe('figures not recorded are not known, with why; never estimated');

const triageSchema = z
  .object({
    classification: z.enum(TRIAGE_CLASSES),
    cause: z.string(),
    reason: z
      .object({ code: z.string(), meaning: z.string() })
      .nullable()
      .describe("Slurm's reason code and what it means"),
    evidence: z.array(z.string()),
  })
  .describe('why a job did not complete');

const specValue = z.union([z.string(), z.number(), z.array(z.string())]);

export const suggestionSchema = z
  .object({
    changes: z
      .record(z.string(), specValue)
      .describe('job spec members and their new values; {} is the same spec again'),
    previous: z.record(z.string(), specValue.nullable()),
    why: z.string(),
    step: z.string().nullable().describe("a pipeline step's: the change belongs in the pipeline file"),
    request_id: z.string().nullable().describe("a step's: the request it is about"),
  })
  .describe('a proposed change to the job spec, applied only by an explicit action');

export const summarySchema = named(
  'Summary',
  z.object({
    id: z.string(),
    of: z.enum(['request', 'run']).describe("the request's own, or (for a pipeline step) its run's"),
    request_id: z.string().nullable(),
    run_id: z.string().nullable(),
    state: z.enum(SUMMARY_STATES).describe('failed: the LLM failed and the template text stands'),
    kind: z.enum(SUMMARY_KINDS).nullable().describe('who wrote the text: llm or template; null while pending'),
    text: z.string().nullable().describe('redacted like everything sent to the LLM'),
    note: z.string().nullable().describe('why the template, or that the text was cut at the bound'),
    model: z.string().nullable(),
    prompt_tokens: z.number().int().nullable(),
    completion_tokens: z.number().int().nullable(),
    latency_ms: z.number().int().nullable(),
    attempts: z.number().int().describe('LLM attempts made'),
    error: z
      .object({ code: z.string().nullable(), message: z.string() })
      .nullable()
      .describe('of the last LLM attempt'),
    findings: z
      .object({
        efficiency: efficiencySchema.nullable(),
        triage: triageSchema.nullable(),
        steps: z
          .array(
            z.object({
              step: z.string(),
              request_id: z.string(),
              state: z.string(),
              efficiency: efficiencySchema,
              triage: triageSchema.nullable(),
            }),
          )
          .nullable()
          .describe("a run's: per step"),
        trend: z
          .object({
            runs: z.array(
              z.object({
                run_id: z.string(),
                state: z.string(),
                duration_sec: z.number().nullable(),
                created_at: time,
              }),
            ),
            median_duration_sec: z.number().nullable(),
            comparison: z.string().nullable(),
            steps: z.array(
              z.object({
                step: z.string(),
                max_time_percent: z.number().nullable(),
                resize: suggestionSchema.nullable(),
              }),
            ),
          })
          .nullable()
          .describe("a recurring pipeline's last runs"),
      })
      .nullable(),
    suggestion: suggestionSchema.nullable(),
    applied_request_id: z.string().nullable().describe('the request made by applying the suggestion'),
    applied_at: time.nullable(),
    created_at: time,
    updated_at: time,
    completed_at: time.nullable(),
    links: z.object({
      resubmit: z.string().optional().describe('POST here to apply the suggestion'),
      applied: z.string().optional(),
    }),
  }),
  'A post-job summary as stored (never the prompt)',
);
