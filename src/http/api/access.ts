import type { FastifyRequest } from 'fastify';
import type { Principal } from '../../access/principal.js';
import { runAccess } from '../../access/visibility.js';
import type { RunAccess } from '../../db/runs.js';
import type { ApiDeps } from '../deps.js';
import { callerOf } from './local-credential.js';

/** For whom a route's caller acts and what it may see (src/access/principal.ts). */
export const principalOf = (request: FastifyRequest): Principal => callerOf(request).principal;

/**
 * The runs a principal may read or cancel, for the queries of src/db/runs.ts: its owner's and
 * those of the pipelines that allow its owner; undefined for every run. Asked the same way for
 * every id, its own or not, so that no answer takes another path.
 */
export async function runAccessOf(
  deps: Pick<ApiDeps, 'pipelines'>,
  principal: Principal,
  use: 'read' | 'change',
): Promise<RunAccess | undefined> {
  if (runAccess(principal, [], use) === undefined) return undefined;
  return runAccess(principal, (await deps.pipelines?.list()) ?? [], use);
}
