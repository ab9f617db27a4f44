import type { FastifyPluginAsyncZod } from 'fastify-type-provider-zod';
import { hasScope } from '../../../access/principal.js';
import { clusterBody } from '../../../views/cluster-view.js';
import type { ApiDeps } from '../../deps.js';
import { NotFoundApiError, UnavailableApiError } from '../api-errors.js';
import { answer, errors } from '../shared-schemas.js';
import { clusterAnswerSchema, clusterParams } from './cluster.schema.js';
import { bearer } from './security.js';

/**
 * `/api/v1/cluster/{profile}/{view}`: the cluster's partitions, nodes, reservations and queue,
 * one cached read per view per profile for every viewer (src/sched/cluster-view.ts).
 */
export const clusterRoutes: FastifyPluginAsyncZod<{ deps: ApiDeps }> = async (app, { deps }) => {
  app.get(
    '/api/v1/cluster/:profile/:view',
    {
      config: { scope: 'read' },
      schema: {
        tags: ['cluster'],
        operationId: 'getClusterView',
        summary: 'Read the cluster: partitions, nodes, reservations or the queue',
        description: [
          '`partitions`: state, nodes, CPUs allocated/idle/other/total (as `sinfo` counts them), memory, running and pending jobs, limits, who may use them. `nodes`: state and reason, CPUs and memory allocated, features, GRES, partitions, the running jobs on each. `reservations`. `queue`: the controller’s pending, running and suspended jobs, running first.',
          'Every viewer within the lifetime (`ttl_sec`, setting `clusterViewTtlMs`) gets the same answer: the upstream is read once per view per lifetime, whoever asks, and not at all when nobody does. While the scheduler cannot be read the last answer is served with `stale: true` and why; with no earlier answer, 503.',
          'Scope: read. The queue lists every user’s jobs: a token without `admin` or `audit` gets it anonymised (`anonymised: true`: names, users and accounts null).',
        ].join(' '),
        security: bearer,
        params: clusterParams,
        response: { 200: answer('the view', clusterAnswerSchema), ...errors(400, 401, 403, 404, 429, 503) },
      },
    },
    async (request) => {
      const { profile, view } = request.params;
      if (!deps.profiles.has(profile)) {
        throw new NotFoundApiError(
          `no profile "${profile}" (the daemon has: ${[...deps.profiles.keys()].join(', ') || 'none'})`,
        );
      }
      if (!deps.clusterView) throw new UnavailableApiError('the cluster view is not served by this process');
      const result = await deps.clusterView.view(profile, view);
      const token = request.apiToken;
      const everyOwner = token !== null && (hasScope(token.scopes, 'admin') || token.scopes.includes('audit'));
      return clusterBody(result, deps.clusterView.ttlMs, everyOwner);
    },
  );
};
