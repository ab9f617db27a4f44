import { z } from 'zod';
import { AUDIT_OUTCOMES } from '../../../db/schema.js';
import { cursorQuery, limitQuery, named, time, timeInput } from '../shared-schemas.js';

/** Schemas of the audit log's route (audit.ts). */

export const auditQuery = z.strictObject({
  since: timeInput.optional().describe('rows at or after this time'),
  owner: z.string().min(1).max(64).optional().describe("rows about this owner's things"),
  action: z
    .string()
    .regex(/^[a-z-]+\.[a-z-]+$/, 'an action name, e.g. request.cancel (docs/audit.md lists them)')
    .optional()
    .describe('rows of this action, e.g. `request.cancel`'),
  limit: limitQuery,
  cursor: cursorQuery,
});

export const auditRowSchema = named(
  'AuditRow',
  z.object({
    id: z.number().int().describe('increasing: a later row has a larger id'),
    at: time,
    actor: z.string().describe('`token:<name>`, `ui:<user>`, `cli:<unix user>`, `schedule:<pipeline>`, `schedflow`'),
    owner: z.string().nullable().describe('whose thing it acted on; null: nobody’s (a login, an unknown id)'),
    action: z.string().describe('`request.cancel`, `run.trigger`, `schedule.pause`, … (docs/audit.md)'),
    target: z.string().nullable().describe('`request:<id>`, `run:<id>`, `pipeline:<name>`, `token:<name>`, …'),
    outcome: z.enum(AUDIT_OUTCOMES).describe('ok; refused (nothing changed); failed (on the way, upstream)'),
    http_request_id: z.string().nullable().describe('the `x-request-id` of the HTTP call that asked'),
    detail: z.string().nullable(),
  }),
  'One action on the daemon: who did what to whose thing, and how it went.',
);
