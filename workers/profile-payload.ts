import { z } from 'zod';

/** What the per-profile ticks of the poll and reconcile queues carry. */
export const profilePayloadSchema = z.object({ profile: z.string().min(1) });
