import type { FastifyInstance } from 'fastify';
import { type AccountingFilter, matchesFilter } from '../accounting-query.js';
import type { AssociationRecord } from '../associations.js';
import type { Flavor } from '../flavor.js';
import { admit, type CallContext, cachedGet, type Produced, type ProxyContext } from '../proxy-context.js';
import { renderSlurmdbJob } from '../render/slurmdb-job.js';
import { templateFor } from '../render/templates.js';
import type { SimJob } from '../sim-job.js';
import type { SlurmError } from '../slurm-errno.js';
import {
  accountingRefused,
  accountingUnreachable,
  conversionError,
  listParam,
  parseJobId,
  queryRejected,
  warning,
} from '../slurmrestd-answers.js';

type VersionParams = { version: string };
type JobParams = { version: string; job_id: string };
type Query = Record<string, string | string[] | undefined>;

const REJECTED = 'Rejecting request. Failure parsing query parameters';

/** A time parameter: Unix seconds; anything else is slurmrestd's conversion error. */
function parseTime(name: string, value: string | string[] | undefined): number | undefined | SlurmError {
  if (value === undefined) return undefined;
  if (Array.isArray(value)) return conversionError(name, `Expected integer but got ${JSON.stringify(value)}`);
  return /^\d+$/.test(value) ? Number(value) : conversionError(name, `Parsing of ${value} for timestamp failed`);
}

/** The query as slurmdbd's job condition, or the errors slurmrestd rejects it with. */
function parseFilter(query: Query): AccountingFilter | SlurmError[] {
  const start = parseTime('start_time', query.start_time);
  const end = parseTime('end_time', query.end_time);
  const errors = [start, end].filter((t): t is SlurmError => typeof t === 'object');
  // Each step is a job id (`1%2C2` is not one: lists come as repeated parameters).
  const steps = listParam(query.step)?.map(parseJobId);
  const jobIds = steps?.filter((id): id is number => id !== undefined);
  if (errors.length || jobIds?.length !== steps?.length) return errors;
  return {
    startSec: typeof start === 'number' ? start : undefined,
    endSec: typeof end === 'number' ? end : undefined,
    accounts: listParam(query.account),
    jobNames: listParam(query.job_name),
    users: listParam(query.users),
    partitions: listParam(query.partition),
    states: listParam(query.state)?.map((s) => s.toUpperCase()),
    jobIds,
  };
}

/** The listing of accounting records; slurmrestd notes an empty one with a warning. */
function listing(call: CallContext, jobs: SimJob[], nowSec: number): Produced {
  const rendered = jobs.map((job) => renderSlurmdbJob(job, call.render, nowSec));
  const warnings = rendered.length ? [] : [warning('slurmdb_jobs_get() found nothing', '_dump_jobs')];
  return { status: 200, body: { jobs: rendered, ...call.envelope('slurmdbd', [], warnings) } };
}

/**
 * One association as slurmdbd 25.11.7 lists it (test/fixtures/real-slurm-25.11/associations_*):
 * the captured record with the simulator's user, account and cluster. The v0.0.42 parser
 * dumps every id as 0.
 */
function renderAssociation(call: CallContext, record: AssociationRecord, clusterName: string) {
  const t = structuredClone(templateFor(call.version).association);
  return {
    ...t,
    account: record.account,
    cluster: clusterName,
    id: call.version === 'v0.0.42' ? 0 : record.id,
    is_default: record.isDefault,
    lineage: `/${record.account}/0-${record.user}/`,
    user: record.user,
  };
}

/** slurmdbd endpoints under `{prefix}/{version}/`: the job history and one job's record. */
export function registerAccountingRoutes(app: FastifyInstance, ctx: ProxyContext, flavor: Flavor): void {
  const prefix = flavor.accounting;

  app.get<{ Params: VersionParams; Querystring: Query }>(`${prefix}/:version/jobs`, async (req, reply) => {
    const call = await admit(ctx, req, reply, 'scheddb:read', flavor);
    if (!call) return reply;
    return cachedGet(ctx, call, req, reply, 'dbJobs', 'slurmdbd', () => {
      // slurmrestd opens its slurmdbd connection (with the caller's token) before it reads the query.
      if (!ctx.upstream.slurmdbd) return accountingUnreachable(call);
      if (!call.principal) return accountingRefused(call);
      const now = Math.floor(Date.now() / 1000);
      const filter = parseFilter(req.query);
      if (Array.isArray(filter)) return queryRejected(call, 'slurmdbd', 'op_handler_jobs', REJECTED, filter);
      // Without any parameter slurmrestd asks for every record, with no window at all.
      const all = Object.keys(req.query).length === 0;
      const jobs = ctx.cluster.listJobs().filter((job) => all || matchesFilter(job, filter, now));
      return listing(call, jobs, now);
    });
  });

  app.get<{ Params: JobParams }>(`${prefix}/:version/job/:job_id`, async (req, reply) => {
    const call = await admit(ctx, req, reply, 'scheddb:read', flavor);
    if (!call) return reply;
    return cachedGet(ctx, call, req, reply, 'dbJob', 'slurmdbd', () => {
      if (!ctx.upstream.slurmdbd) return accountingUnreachable(call);
      if (!call.principal) return accountingRefused(call);
      const jobId = parseJobId(req.params.job_id);
      if (jobId === undefined) return queryRejected(call, 'slurmdbd', 'op_handler_job', REJECTED);
      const job = ctx.cluster.getJob(jobId);
      // Not a 404: an id slurmdbd has no record of is an empty listing, as for any query. An
      // array's id lists every record of the array.
      const records = job?.arrayJobId === jobId ? ctx.cluster.arrayRecords(jobId) : job ? [job] : [];
      return listing(call, records, Math.floor(Date.now() / 1000));
    });
  });

  // Plain slurmrestd only: the proxy's contract names no associations endpoint.
  if (flavor.kind !== 'slurmrestd') return;
  app.get<{ Params: VersionParams; Querystring: Query }>(`${prefix}/:version/associations`, async (req, reply) => {
    const call = await admit(ctx, req, reply, 'scheddb:read', flavor);
    if (!call) return reply;
    // Plain slurmrestd caches nothing: cachedGet only answers an unreachable slurmdbd its way.
    return cachedGet(ctx, call, req, reply, 'dbJobs', 'slurmdbd', () => {
      if (!ctx.upstream.slurmdbd) return accountingUnreachable(call);
      if (!call.principal) return accountingRefused(call);
      const records = ctx.associations.list({
        users: listParam(req.query.user),
        accounts: listParam(req.query.account),
      });
      const associations = records.map((r) => renderAssociation(call, r, ctx.config.clusterName));
      // Like the job listing, an empty one comes with slurmdbd's "found nothing" warning.
      const warnings = associations.length
        ? []
        : [warning('slurmdb_associations_get() found nothing', '_dump_assoc_cond')];
      return { status: 200, body: { associations, ...call.envelope('slurmdbd', [], warnings) } };
    });
  });
}
