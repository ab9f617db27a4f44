import { z } from 'zod';

/** Schemas of the health and readiness routes (health.ts). */

export const healthSchema = z.object({ status: z.literal('ok') });
export const readySchema = z.object({
  status: z.enum(['ready', 'not ready']),
  checks: z.record(z.string(), z.string()).describe('each check: ok, or what failed'),
  detail: z
    .record(z.string(), z.string())
    .optional()
    .describe(
      'what is degraded without making the daemon unready, by check: e.g. "serving stale answers since <time>" while a scheduler is down behind its proxy (submissions are still accepted and queued)',
    ),
});
