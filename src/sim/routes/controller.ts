import { constants } from 'node:os';
import type { FastifyInstance } from 'fastify';
import type { Submitter } from '../cluster.js';
import {
  admit,
  type CallContext,
  cachedGet,
  type FlavorHeaders,
  type ProxyContext,
  proxyError,
  slurmErrorEntry,
  upstreamDown,
} from '../proxy-context.js';
import { type NodeView, renderNode, renderPartition } from '../render/cluster-info.js';
import { renderJobInfo, renderJobState } from '../render/job-info.js';
import { noVal } from '../render/templates.js';
import { SlurmError } from '../slurm-errno.js';
import { decodeSubmitBody } from '../submit-request.js';

type VersionParams = { version: string };
type JobParams = { version: string; job_id: string };
type NameParams = { version: string; name: string };

const bootTime = Math.floor(Date.now() / 1000);

function nodeView(ctx: ProxyContext): NodeView {
  const { config, cluster } = ctx;
  return {
    clusterName: config.clusterName,
    nodeName: config.nodeName,
    cpus: config.cpus,
    allocatedCpus: cluster.cpusInUse(),
    memoryMb: config.memoryMb,
    partitions: config.partitions.map((p) => p.name),
    bootTime,
  };
}

function parseJobId(text: string): number | undefined {
  return /^\d+$/.test(text) ? Number(text) : undefined;
}

function notFound(call: CallContext, jobId: string) {
  const error = new SlurmError('ESLURM_INVALID_JOB_ID', `Unable to query JobId=${jobId}`, '_handle_job_get()');
  return {
    status: 404,
    body: {
      jobs: [],
      last_backfill: noVal(null),
      last_update: noVal(null),
      ...call.envelope('slurmctld', [slurmErrorEntry(error)]),
    },
  };
}

/** slurmctld endpoints under `{prefix}/{version}/`: jobs, one job, job states, submit, cancel, partitions, nodes. */
export function registerControllerRoutes(
  app: FastifyInstance,
  ctx: ProxyContext,
  prefix: string,
  headers: FlavorHeaders,
): void {
  const { cluster } = ctx;

  app.get<{ Params: VersionParams; Querystring: { update_time?: string } }>(
    `${prefix}/:version/jobs`,
    async (req, reply) => {
      const call = await admit(ctx, req, reply, 'sched:read', headers);
      if (!call) return reply;
      return cachedGet(ctx, call, req, reply, 'jobs', 'slurmctld', () => {
        const now = Math.floor(Date.now() / 1000);
        const since = req.query.update_time ? Number(req.query.update_time) : undefined;
        // slurmctld answers "no change" with an empty list when nothing changed since update_time.
        const unchanged = since !== undefined && Number.isFinite(since) && cluster.lastJobUpdate <= since;
        const jobs = unchanged
          ? []
          : cluster
              .listJobs()
              .filter((job) => cluster.isInController(job, now))
              .map((job) => renderJobInfo(job, call.render));
        return {
          status: 200,
          body: {
            jobs,
            last_backfill: noVal(now),
            last_update: noVal(cluster.lastJobUpdate),
            ...call.envelope('slurmctld'),
          },
        };
      });
    },
  );

  app.get<{ Params: VersionParams; Querystring: { job_id?: string } }>(
    `${prefix}/:version/jobs/state`,
    async (req, reply) => {
      const call = await admit(ctx, req, reply, 'sched:read', headers);
      if (!call) return reply;
      return cachedGet(ctx, call, req, reply, 'jobsState', 'slurmctld', () => {
        const now = Math.floor(Date.now() / 1000);
        const wanted = req.query.job_id
          ? new Set(req.query.job_id.split(',').map((id) => Number(id.trim())))
          : undefined;
        const jobs = cluster
          .listJobs()
          .filter((job) => cluster.isInController(job, now) && (!wanted || wanted.has(job.jobId)))
          .map(renderJobState);
        return {
          status: 200,
          body: {
            jobs,
            last_backfill: noVal(now),
            last_update: noVal(cluster.lastJobUpdate),
            ...call.envelope('slurmctld'),
          },
        };
      });
    },
  );

  app.get<{ Params: JobParams }>(`${prefix}/:version/job/:job_id`, async (req, reply) => {
    const call = await admit(ctx, req, reply, 'sched:read', headers);
    if (!call) return reply;
    return cachedGet(ctx, call, req, reply, 'job', 'slurmctld', () => {
      const jobId = parseJobId(req.params.job_id);
      const job = jobId === undefined ? undefined : cluster.getJob(jobId);
      if (!job || !cluster.isInController(job)) return notFound(call, req.params.job_id);
      return {
        status: 200,
        body: {
          jobs: [renderJobInfo(job, call.render)],
          last_backfill: noVal(Math.floor(Date.now() / 1000)),
          last_update: noVal(cluster.lastJobUpdate),
          ...call.envelope('slurmctld'),
        },
      };
    });
  });

  app.post<{ Params: VersionParams; Body: unknown }>(`${prefix}/:version/job/submit`, async (req, reply) => {
    const call = await admit(ctx, req, reply, 'sched:jobs:manage', headers);
    if (!call) return reply;
    if (!ctx.upstream.slurmctld) return upstreamDown(reply, 'slurmctld');
    const decoded = decodeSubmitBody(req.body);
    if (!decoded.ok) {
      const error = new SlurmError(
        decoded.problem === 'hetjob' ? 'ESLURM_NOT_SUPPORTED' : 'ESLURM_REST_INVALID_JOBS_DESC',
        decoded.message,
        '_op_handler_submit_job()',
      );
      return reply
        .code(decoded.problem === 'hetjob' ? 500 : 400)
        .send(call.envelope('slurmctld', [slurmErrorEntry(error)]));
    }
    const { principal } = call;
    let submitter: Submitter;
    if (principal.kind === 'bearer') {
      // The proxy's account binding: a bearer caller submits only as its token's account.
      const requested = decoded.request.account;
      if (requested && requested !== principal.account) {
        return proxyError(
          reply,
          403,
          'Forbidden',
          `account restriction: this token may only submit to account "${principal.account}", not "${requested}"`,
        );
      }
      submitter = { user: principal.user, userId: ctx.uidOf(principal.user), defaultAccount: principal.account };
    } else {
      submitter = {
        user: principal.user,
        userId: principal.uid,
        defaultAccount: ctx.config.users[principal.user]?.defaultAccount,
      };
    }
    try {
      const job = cluster.submit(decoded.request, submitter);
      return reply.code(200).send({
        job_id: job.jobId,
        step_id: 'batch',
        job_submit_user_msg: '',
        ...call.envelope('slurmctld'),
      });
    } catch (error) {
      if (!(error instanceof SlurmError)) throw error;
      // A refusal by slurmctld comes back as HTTP 500 with the Slurm error in errors[].
      return reply.code(500).send(call.envelope('slurmctld', [slurmErrorEntry(error)]));
    }
  });

  app.delete<{ Params: JobParams; Querystring: { signal?: string } }>(
    `${prefix}/:version/job/:job_id`,
    async (req, reply) => {
      const call = await admit(ctx, req, reply, 'sched:jobs:manage', headers);
      if (!call) return reply;
      if (!ctx.upstream.slurmctld) return upstreamDown(reply, 'slurmctld');
      const jobId = parseJobId(req.params.job_id);
      const job = jobId === undefined ? undefined : cluster.getJob(jobId);
      const known = job && cluster.isInController(job) ? job : undefined;
      if (known && call.principal.kind === 'bearer' && known.account !== call.principal.account) {
        return proxyError(
          reply,
          403,
          'Forbidden',
          `account restriction: job ${known.jobId} belongs to account "${known.account}"; this token may only cancel jobs of account "${call.principal.account}"`,
        );
      }
      const signal = req.query.signal ? parseSignal(req.query.signal) : undefined;
      if (req.query.signal && signal === undefined) {
        return proxyError(reply, 400, 'Bad Request', `unknown signal "${req.query.signal}"`);
      }
      const result =
        !known || jobId === undefined
          ? { ok: false as const, error: new SlurmError('ESLURM_INVALID_JOB_ID', 'Job not found', 'slurm_kill_job()') }
          : signal && signal !== 'SIGKILL' && signal !== 'SIGTERM'
            ? cluster.signal(jobId, signal)
            : cluster.cancel(jobId);
      // Like slurmrestd: HTTP 200 even when the kill failed; the failure is in status[].
      const status = result.ok
        ? []
        : [
            {
              error: { string: result.error.message, code: result.error.errno, message: result.error.description },
              step_id: 'batch',
              job_id: noVal(jobId ?? null),
              federation: { sibling: '' },
            },
          ];
      return reply.code(200).send({ status, ...call.envelope('slurmctld') });
    },
  );

  app.get<{ Params: VersionParams }>(`${prefix}/:version/ping`, async (req, reply) => {
    const call = await admit(ctx, req, reply, 'sched:read', headers);
    if (!call) return reply;
    return cachedGet(ctx, call, req, reply, 'ping', 'slurmctld', () => ({
      status: 200,
      body: {
        pings: [
          {
            hostname: ctx.config.nodeName,
            pinged: 'UP',
            responding: true,
            latency: 150,
            mode: 'primary',
            primary: true,
          },
        ],
        ...call.envelope('slurmctld'),
      },
    }));
  });

  app.get<{ Params: VersionParams }>(`${prefix}/:version/partitions`, async (req, reply) => {
    const call = await admit(ctx, req, reply, 'sched:read', headers);
    if (!call) return reply;
    return cachedGet(ctx, call, req, reply, 'partitions', 'slurmctld', () => ({
      status: 200,
      body: {
        partitions: ctx.config.partitions.map((p) => renderPartition(p, nodeView(ctx))),
        last_update: noVal(bootTime),
        ...call.envelope('slurmctld'),
      },
    }));
  });

  app.get<{ Params: NameParams }>(`${prefix}/:version/partition/:name`, async (req, reply) => {
    const call = await admit(ctx, req, reply, 'sched:read', headers);
    if (!call) return reply;
    return cachedGet(ctx, call, req, reply, 'partitions', 'slurmctld', () => {
      const p = cluster.partition(req.params.name);
      const error = new SlurmError(
        'ESLURM_INVALID_PARTITION_NAME',
        `Unable to find partition ${req.params.name}`,
        '_op_handler_partition()',
      );
      return {
        status: p ? 200 : 404,
        body: {
          partitions: p ? [renderPartition(p, nodeView(ctx))] : [],
          last_update: noVal(bootTime),
          ...call.envelope('slurmctld', p ? [] : [slurmErrorEntry(error)]),
        },
      };
    });
  });

  app.get<{ Params: VersionParams }>(`${prefix}/:version/nodes`, async (req, reply) => {
    const call = await admit(ctx, req, reply, 'sched:read', headers);
    if (!call) return reply;
    return cachedGet(ctx, call, req, reply, 'nodes', 'slurmctld', () => ({
      status: 200,
      body: { nodes: [renderNode(nodeView(ctx))], last_update: noVal(bootTime), ...call.envelope('slurmctld') },
    }));
  });

  app.get<{ Params: NameParams }>(`${prefix}/:version/node/:name`, async (req, reply) => {
    const call = await admit(ctx, req, reply, 'sched:read', headers);
    if (!call) return reply;
    return cachedGet(ctx, call, req, reply, 'nodes', 'slurmctld', () => {
      const found = req.params.name === ctx.config.nodeName;
      const error = new SlurmError(
        'ESLURM_INVALID_NODE_NAME',
        `Unable to find node ${req.params.name}`,
        '_op_handler_node()',
      );
      return {
        status: found ? 200 : 404,
        body: {
          nodes: found ? [renderNode(nodeView(ctx))] : [],
          last_update: noVal(bootTime),
          ...call.envelope('slurmctld', found ? [] : [slurmErrorEntry(error)]),
        },
      };
    });
  });
}

/** Accepts `USR1`, `SIGUSR1` or `10`, as scancel --signal does. */
function parseSignal(text: string): NodeJS.Signals | undefined {
  const upper = text.toUpperCase();
  const name = (upper.startsWith('SIG') ? upper : `SIG${upper}`) as NodeJS.Signals;
  if (name in constants.signals) return name;
  const number = Number(text);
  const found = Object.entries(constants.signals).find(([, n]) => n === number);
  return found ? (found[0] as NodeJS.Signals) : undefined;
}
