import type { RunAccess } from '../db/runs.js';
import type { ApiScope } from '../db/schema.js';
import { DEFAULT_OWNER, hasScope, type Principal, seesEveryOwner } from './principal.js';

/**
 * What a principal may see and change, as the queries of src/db filter it. One filter per
 * question, applied in the one query that reads the row: another owner's id then reads exactly
 * as an unknown id does (no row, the same 404, the same work), with nothing fetched and compared
 * after.
 */

/** The owner a read is filtered to: undefined for admins and auditors, who read every owner's. */
export function readOwner(p: Principal): string | undefined {
  return seesEveryOwner(p) ? undefined : p.owner;
}

/**
 * Whether a reader filtered to its owner still sees the accounting records of jobs schedflow
 * did not submit: they are no owner's, and `default` saw them before owners existed.
 */
export const seesExternalJobs = (owner: string | undefined): boolean => owner === undefined || owner === DEFAULT_OWNER;

/** The owner a change (cancel, resubmit, retry) is filtered to: undefined for admins only. */
export function changeOwner(p: Principal): string | undefined {
  return hasScope(p.scopes, 'admin') ? undefined : p.owner;
}

/** A pipeline as access sees it: whose it is, and which other owners it lets in. */
export interface OwnedPipeline {
  readonly name: string;
  readonly owner: string;
  readonly allow: readonly string[];
}

/**
 * Whether the principal may list, read, trigger, pause and resume a pipeline (the route's scope
 * apart): admins and auditors (reading) every one, others their owner's and those that `allow:` it.
 */
export function mayUsePipeline(p: Principal, pipeline: OwnedPipeline, use: 'read' | 'change'): boolean {
  if (use === 'read' ? seesEveryOwner(p) : hasScope(p.scopes, 'admin')) return true;
  return pipeline.owner === p.owner || pipeline.allow.includes(p.owner);
}

/**
 * Which runs a principal may read or cancel: undefined for every run (admins; auditors reading),
 * else its owner's and those of the pipelines that allow its owner.
 */
export function runAccess(
  p: Principal,
  pipelines: readonly OwnedPipeline[],
  use: 'read' | 'change',
): RunAccess | undefined {
  if (use === 'read' ? seesEveryOwner(p) : hasScope(p.scopes, 'admin')) return undefined;
  return {
    owner: p.owner,
    pipelines: pipelines.filter((q) => q.owner !== p.owner && q.allow.includes(p.owner)).map((q) => q.name),
  };
}

/**
 * Whether a reader with `access` (runAccess for reading; undefined: every run) reads a request or
 * run of `owner` whose run is of `pipeline` (null: a request not of a run). The rule the queries
 * of src/db apply (getRun, getReadableRequest), for what no query filters: the UI's live feed.
 */
export function readsOwned(access: RunAccess | undefined, owner: string, pipeline: string | null): boolean {
  return access === undefined || owner === access.owner || (pipeline !== null && access.pipelines.includes(pipeline));
}

/**
 * Whether `scopes` let a route needing `needed` through: the scope itself or `admin`, and, for a
 * route that only reads, `audit` (the auditor reads everything and changes nothing).
 */
export function grants(scopes: readonly ApiScope[], needed: ApiScope): boolean {
  return hasScope(scopes, needed) || (needed === 'read' && scopes.includes('audit'));
}
