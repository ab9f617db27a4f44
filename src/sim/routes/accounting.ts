import type { FastifyInstance } from 'fastify';
import { admit, cachedGet, type FlavorHeaders, type ProxyContext, slurmErrorEntry } from '../proxy-context.js';
import { renderSlurmdbJob } from '../render/slurmdb-job.js';
import type { SimJob } from '../sim-job.js';
import { SlurmError } from '../slurm-errno.js';

type VersionParams = { version: string };
type JobParams = { version: string; job_id: string };

/** The query parameters of `GET /slurmdb/{v}/jobs` the simulator honours. */
export interface AccountingQuery {
  start_time?: string;
  end_time?: string;
  account?: string;
  job_name?: string;
  state?: string;
  users?: string;
  partition?: string;
  /** slurmdbd's step list doubles as a job id filter (`sacct -j`). */
  step?: string;
}

const csv = (value: string | undefined): Set<string> | undefined =>
  value
    ? new Set(
        value
          .split(',')
          .map((v) => v.trim())
          .filter((v) => v !== ''),
      )
    : undefined;

/**
 * slurmdbd's usage window: with `start_time`/`end_time`, a job matches when it was
 * eligible by the time the window ends and had not ended before it starts. A job that
 * never became eligible (cancelled while held by a dependency) matches no window.
 */
export function inUsageWindow(
  job: SimJob,
  startSec: number | undefined,
  endSec: number | undefined,
  nowSec: number,
): boolean {
  if (startSec === undefined && endSec === undefined) return true;
  const windowEnd = endSec ?? nowSec;
  const windowStart = startSec ?? 0;
  if (job.eligibleTime === 0 || job.eligibleTime > windowEnd) return false;
  return job.endTime === 0 || job.endTime >= windowStart;
}

function parseTime(text: string | undefined): number | undefined | 'invalid' {
  if (text === undefined || text === '') return undefined;
  return /^\d+$/.test(text) ? Number(text) : 'invalid';
}

export interface UsageWindow {
  start: number | undefined;
  end: number | undefined;
}

export function matchesQuery(job: SimJob, query: AccountingQuery, window: UsageWindow, nowSec: number): boolean {
  if (!inUsageWindow(job, window.start, window.end, nowSec)) return false;
  const checks: [Set<string> | undefined, string][] = [
    [csv(query.account), job.account],
    [csv(query.job_name), job.name],
    [csv(query.users), job.user],
    [csv(query.partition), job.partition],
    [csv(query.step), String(job.jobId)],
  ];
  for (const [wanted, value] of checks) if (wanted && !wanted.has(value)) return false;
  const states = csv(query.state?.toUpperCase());
  return !states || states.has(job.state);
}

/** slurmdbd endpoints under `{prefix}/{version}/`: the job history and one job's record. */
export function registerAccountingRoutes(
  app: FastifyInstance,
  ctx: ProxyContext,
  prefix: string,
  headers: FlavorHeaders,
): void {
  app.get<{ Params: VersionParams; Querystring: AccountingQuery }>(`${prefix}/:version/jobs`, async (req, reply) => {
    const call = await admit(ctx, req, reply, 'scheddb:read', headers);
    if (!call) return reply;
    return cachedGet(ctx, call, req, reply, 'dbJobs', 'slurmdbd', () => {
      const now = Math.floor(Date.now() / 1000);
      const start = parseTime(req.query.start_time);
      const end = parseTime(req.query.end_time);
      if (start === 'invalid' || end === 'invalid') {
        const error = new SlurmError(
          'ESLURM_REST_INVALID_QUERY',
          'start_time and end_time must be Unix timestamps',
          '_op_handler_jobs()',
        );
        return { status: 400, body: { jobs: [], ...call.envelope('slurmdbd', [slurmErrorEntry(error)]) } };
      }
      const jobs = ctx.cluster
        .listJobs()
        .filter((job) => matchesQuery(job, req.query, { start, end }, now))
        .map((job) => renderSlurmdbJob(job, call.render, now));
      return { status: 200, body: { jobs, ...call.envelope('slurmdbd') } };
    });
  });

  app.get<{ Params: JobParams }>(`${prefix}/:version/job/:job_id`, async (req, reply) => {
    const call = await admit(ctx, req, reply, 'scheddb:read', headers);
    if (!call) return reply;
    return cachedGet(ctx, call, req, reply, 'dbJob', 'slurmdbd', () => {
      const now = Math.floor(Date.now() / 1000);
      const jobId = /^\d+$/.test(req.params.job_id) ? Number(req.params.job_id) : undefined;
      const job = jobId === undefined ? undefined : ctx.cluster.getJob(jobId);
      if (!job) {
        const error = new SlurmError(
          'ESLURM_REST_EMPTY_RESULT',
          `No job found with id ${req.params.job_id}`,
          '_op_handler_job()',
        );
        return { status: 404, body: { jobs: [], ...call.envelope('slurmdbd', [slurmErrorEntry(error)]) } };
      }
      return { status: 200, body: { jobs: [renderSlurmdbJob(job, call.render, now)], ...call.envelope('slurmdbd') } };
    });
  });
}
