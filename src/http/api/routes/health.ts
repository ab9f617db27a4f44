import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { z } from 'zod';
import { historyAnswers } from '../../../db/history-meta.js';
import { withTimeout } from '../../../lib/with-timeout.js';
import type { ApiDeps } from '../../deps.js';
import type { ApiMetrics } from '../metrics.js';
import { answer, errors } from '../shared-schemas.js';
import { healthSchema, readySchema } from './health.schema.js';
import { noToken } from './security.js';

/** Readiness checks give up after this: a probe must answer even when a dependency hangs. */
const CHECK_TIMEOUT_MS = 1000;

/** Probes and metrics: no token, no rate limit (orchestrators and Prometheus call them often). */
export const healthRoutes: FastifyPluginAsyncZod<{ deps: ApiDeps; metrics: ApiMetrics }> = async (
  app,
  { deps, metrics },
) => {
  const open = { rateLimit: false } as const;

  app.get(
    '/healthz',
    {
      config: open,
      schema: {
        tags: ['operations'],
        security: noToken,
        operationId: 'getHealth',
        summary: 'Liveness',
        description: 'Always 200 while the process serves. No token.',
        response: { 200: answer('alive', healthSchema), ...errors() },
      },
    },
    async () => ({ status: 'ok' as const }),
  );

  app.get(
    '/readyz',
    {
      config: open,
      schema: {
        tags: ['operations'],
        security: noToken,
        operationId: 'getReadiness',
        summary: 'Readiness',
        description:
          "Redis answers PING, the history database answers, and every scheduler profile has connected: 200; otherwise 503 naming the checks that failed, a profile's (`scheduler:<profile>`) in one sentence with its fix: unreachable (the address tried), its credential refused (401/403), the wrong `flavor`, an API version not served, or no scheduler API at its url. `detail` says what is degraded without making the daemon unready, such as a profile serving stale answers since a given time, and a profile whose token lacks a scope, or whose scopes are not known yet (`scopes:<profile>`: a token without `sched:jobs:manage` or `scheddb:read` has its submissions refused). No token.",
        response: { 200: answer('ready', readySchema), 503: answer('not ready', readySchema), ...errors() },
      },
    },
    async (_request, reply) => {
      const checks: Record<string, string> = {};
      const run = async (name: string, check: () => Promise<void> | void) => {
        try {
          await withTimeout(Promise.resolve().then(check), CHECK_TIMEOUT_MS);
          checks[name] = 'ok';
        } catch (error) {
          checks[name] = (error as Error).message || 'failed';
        }
      };
      await Promise.all([
        run('redis', () => deps.pingRedis()),
        run('history', async () => {
          await historyAnswers(deps.store);
        }),
        ...[...deps.profiles.keys()].map((profile) =>
          run(`scheduler:${profile}`, () => {
            // The profile's last check: unreachable (the address tried), its token refused, the
            // wrong flavor or version, in one sentence with the fix (src/sched/profile-check.ts).
            const problem = deps.clients.problem(profile);
            if (problem) throw new Error(problem.sentence);
            if (!deps.clients.connected(profile)) throw new Error('not connected yet (the scheduler has not answered)');
          }),
        ),
      ]);
      const ready = Object.values(checks).every((c) => c === 'ok');
      // A scheduler down behind its proxy does not make the daemon unready (requests are still
      // accepted and queued, and jobs keep their last known state), but it is said, not hidden.
      const detail: Record<string, string> = {};
      for (const profile of deps.profiles.keys()) {
        const note = deps.clients.health(profile)?.staleNote();
        if (note) detail[`scheduler:${profile}`] = note;
        // A token without a scope does not make the daemon unready (other profiles work), but is said.
        const scopes = deps.clients.scopes(profile);
        if (scopes && (scopes.missing.length > 0 || Object.values(scopes.scopes).includes('unknown'))) {
          detail[`scopes:${profile}`] = scopes.detail;
        }
        // Nor does an account the user cannot charge, or accounts that could not be read.
        const accounts = deps.clients.accounts(profile);
        if (accounts && (accounts.defaultNotAssociated || accounts.source === 'unknown')) {
          detail[`accounts:${profile}`] = accounts.detail;
        }
      }
      return reply
        .code(ready ? 200 : 503)
        .send({ status: ready ? 'ready' : 'not ready', checks, ...(Object.keys(detail).length > 0 && { detail }) });
    },
  );

  app.get(
    '/metrics',
    {
      config: open,
      schema: {
        tags: ['operations'],
        security: noToken,
        operationId: 'getMetrics',
        summary: 'Prometheus metrics',
        description:
          'Requests by state, BullMQ jobs per queue and state, seconds since each profile’s last successful poll, upstream requests by profile, endpoint and status, stale answers, the age of the freshest fresh answer, API requests by route and status with their durations. No token.',
        response: {
          200: { description: 'Prometheus text format', content: { 'text/plain': { schema: z.string() } } },
          ...errors(),
        },
      },
    },
    async (_request, reply) => {
      const text = await metrics.registry.metrics();
      return reply.type(metrics.registry.contentType).send(text);
    },
  );
};
