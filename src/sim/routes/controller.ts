import { constants } from 'node:os';
import type { FastifyInstance } from 'fastify';
import type { Submitter } from '../cluster.js';
import { type Flavor, SLURMRESTD_TEXT, sendSlurmrestdText } from '../flavor.js';
import {
  admit,
  type CallContext,
  cachedGet,
  type ProxyContext,
  proxyError,
  sendSlurm,
  slurmErrorEntry,
  upstreamDown,
} from '../proxy-context.js';
import { type NodeView, renderNode, renderPartition } from '../render/cluster-info.js';
import { renderJobInfo, renderJobState } from '../render/job-info.js';
import { noVal } from '../render/templates.js';
import type { SimJob } from '../sim-job.js';
import { SlurmError } from '../slurm-errno.js';
import {
  CONTROLLER_REFUSED_STATUS,
  controllerUnreachable,
  conversionError,
  credentialRefusedEntry,
  listParam,
  parseJobId,
  queryRejected,
  warning,
} from '../slurmrestd-answers.js';
import { decodeSubmitBody, UNPARSABLE_BODY } from '../submit-request.js';

type VersionParams = { version: string };
type JobParams = { version: string; job_id: string };
type NameParams = { version: string; name: string };
type Query = Record<string, string | string[] | undefined>;

const bootTime = Math.floor(Date.now() / 1000);

function nodeView(ctx: ProxyContext, version: string): NodeView {
  const { config, cluster } = ctx;
  const allocatedCpus = cluster.cpusInUse();
  return {
    clusterName: config.clusterName,
    nodeName: config.nodeName,
    cpus: config.cpus,
    allocatedCpus,
    memoryMb: config.memoryMb,
    allocatedMemoryMb: cluster.memoryInUse(),
    partitions: config.partitions.map((p) => p.name),
    bootTime,
    // Busy now, or not since it started: close enough for a field nothing reads.
    lastBusy: allocatedCpus > 0 ? Math.floor(Date.now() / 1000) : bootTime,
    version,
  };
}

/** `2026-11-24T07:20:06`: how slurmctld prints a time in a warning (local time, no zone). */
function slurmTime(sec: number): string {
  const d = new Date(sec * 1000);
  const pad = (n: number) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())}T${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

/** The answer of `GET /job/{id}` without a job: unknown id (404) or a refused credential (511). */
function noJob(call: CallContext, status: number, error: SlurmError | Record<string, unknown>) {
  return {
    status,
    body: {
      jobs: [],
      last_backfill: noVal(0),
      last_update: noVal(0),
      ...call.envelope('slurmctld', [error instanceof SlurmError ? slurmErrorEntry(error) : error]),
    },
  };
}

/** slurmctld endpoints under `{prefix}/{version}/`: jobs, one job, job states, submit, cancel, partitions, nodes. */
export function registerControllerRoutes(app: FastifyInstance, ctx: ProxyContext, flavor: Flavor): void {
  const { cluster } = ctx;
  const prefix = flavor.controller;

  app.get<{ Params: VersionParams; Querystring: Query }>(`${prefix}/:version/jobs`, async (req, reply) => {
    const call = await admit(ctx, req, reply, 'sched:read', flavor);
    if (!call) return reply;
    return cachedGet(ctx, call, req, reply, 'jobs', 'slurmctld', () => {
      const now = Math.floor(Date.now() / 1000);
      const raw = req.query.update_time;
      const since = typeof raw === 'string' && /^\d+$/.test(raw) ? Number(raw) : undefined;
      if (raw !== undefined && since === undefined) {
        return queryRejected(call, 'slurmctld', 'op_handler_jobs', 'Rejecting request. Failure parsing query.', [
          conversionError('update_time', `Parsing of ${String(raw)} for timestamp failed`),
        ]);
      }
      if (!ctx.upstream.slurmctld) return controllerUnreachable(call, 'jobs');
      if (!call.principal) {
        return noJob(
          call,
          CONTROLLER_REFUSED_STATUS,
          credentialRefusedEntry('Unable to query jobs', 'slurm_load_jobs()'),
        );
      }
      // slurmctld answers "no change" when nothing changed since update_time: no jobs, no last_update.
      if (since !== undefined && cluster.lastJobUpdate <= since) {
        return {
          status: 200,
          body: {
            jobs: [],
            last_backfill: noVal(now),
            last_update: noVal(0),
            ...call.envelope(
              'slurmctld',
              [],
              [warning(`No job changes since update_time[${since}]=${slurmTime(since)}`, 'op_handler_jobs')],
            ),
          },
        };
      }
      const jobs = cluster
        .listJobs()
        .filter((job) => cluster.isInController(job, now))
        .map((job) => renderJobInfo(job, call.render));
      return {
        status: 200,
        body: {
          jobs,
          last_backfill: noVal(now),
          last_update: noVal(cluster.lastJobUpdate),
          ...call.envelope('slurmctld', [], jobs.length ? [] : [warning('Zero jobs to dump', '')]),
        },
      };
    });
  });

  app.get<{ Params: VersionParams; Querystring: Query }>(`${prefix}/:version/jobs/state`, async (req, reply) => {
    const call = await admit(ctx, req, reply, 'sched:read', flavor);
    if (!call) return reply;
    return cachedGet(ctx, call, req, reply, 'jobsState', 'slurmctld', () => {
      const now = Math.floor(Date.now() / 1000);
      // Several ids come as repeated `job_id`; each must be a job id (`1%2C2` is not one).
      const ids = listParam(req.query.job_id)?.map(parseJobId);
      if (ids?.some((id) => id === undefined)) {
        return queryRejected(call, 'slurmctld', 'op_handler_job_states', 'Rejecting request. Failure parsing query');
      }
      if (!ctx.upstream.slurmctld) return controllerUnreachable(call, 'jobsState');
      if (!call.principal) {
        return {
          status: CONTROLLER_REFUSED_STATUS,
          body: {
            jobs: null,
            ...call.envelope('slurmctld', [
              credentialRefusedEntry('Unable to query job states', 'slurm_load_job_state()'),
            ]),
          },
        };
      }
      // As slurmctld answers a list of ids: one entry per id asked, in the order asked (an id
      // asked twice comes twice), and nothing for an id it does not hold.
      const held = (job: SimJob | undefined): job is SimJob => job !== undefined && cluster.isInController(job, now);
      const jobs = (ids ? (ids as number[]).flatMap((id) => recordsFor(cluster, id)) : cluster.listJobs())
        .filter(held)
        .flatMap(renderJobState);
      return { status: 200, body: { jobs, ...call.envelope('slurmctld') } };
    });
  });

  app.get<{ Params: JobParams }>(`${prefix}/:version/job/:job_id`, async (req, reply) => {
    const call = await admit(ctx, req, reply, 'sched:read', flavor);
    if (!call) return reply;
    return cachedGet(ctx, call, req, reply, 'job', 'slurmctld', () => {
      const jobId = parseJobId(req.params.job_id);
      if (jobId === undefined) {
        return queryRejected(call, 'slurmctld', 'op_handler_job', 'Rejecting request. Failure parsing parameters');
      }
      if (!ctx.upstream.slurmctld) return controllerUnreachable(call, 'job', jobId);
      const description = `Unable to query JobId=${jobId}`;
      if (!call.principal) {
        return noJob(call, CONTROLLER_REFUSED_STATUS, credentialRefusedEntry(description, '_handle_job_get'));
      }
      const job = cluster.getJob(jobId);
      if (!job || !cluster.isInController(job)) {
        return noJob(call, 404, new SlurmError('ESLURM_INVALID_JOB_ID', description, '_handle_job_get'));
      }
      const records = recordsFor(cluster, jobId).filter((record) => cluster.isInController(record));
      return {
        status: 200,
        body: {
          jobs: records.map((record) => renderJobInfo(record, call.render)),
          last_backfill: noVal(Math.floor(Date.now() / 1000)),
          last_update: noVal(cluster.lastJobUpdate),
          ...call.envelope('slurmctld'),
        },
      };
    });
  });

  app.post<{ Params: VersionParams; Body: unknown }>(`${prefix}/:version/job/submit`, async (req, reply) => {
    const call = await admit(ctx, req, reply, 'sched:jobs:manage', flavor);
    if (!call) return reply;
    // The proxy says so itself; slurmrestd first checks the body, then finds slurmctld gone.
    if (!ctx.upstream.slurmctld && flavor.kind === 'proxy') return upstreamDown(reply, 'slurmctld');
    if (req.body === UNPARSABLE_BODY) return sendSlurmrestdText(reply, 400, SLURMRESTD_TEXT.unparsableBody);
    // slurmrestd checks the body itself before it asks slurmctld anything.
    const decoded = decodeSubmitBody(req.body);
    if (!decoded.ok) {
      if (decoded.problem === 'dropped') {
        return sendSlurm(reply, 200, call.envelope('slurmctld', [], decoded.warnings));
      }
      if (decoded.problem === 'hetjob') {
        // Heterogeneous jobs are not simulated: say so rather than pretend.
        const error = new SlurmError('ESLURM_NOT_SUPPORTED', decoded.message, '_job_post_het_submit');
        return sendSlurm(reply, 500, call.envelope('slurmctld', [slurmErrorEntry(error)]));
      }
      if (decoded.problem === 'empty-script') {
        const error = new SlurmError('ESLURM_JOB_SCRIPT_MISSING', decoded.message, 'script');
        return sendSlurm(reply, 500, call.envelope('slurmctld', [slurmErrorEntry(error)]));
      }
      const rejected = queryRejected(call, 'slurmctld', '_job_post', decoded.message);
      return sendSlurm(reply, rejected.status, rejected.body);
    }
    if (!ctx.upstream.slurmctld) {
      const unreachable = controllerUnreachable(call, 'submit');
      // The body's warnings come along: slurmrestd read it before it found slurmctld gone.
      return sendSlurm(reply, unreachable.status, { ...unreachable.body, warnings: decoded.warnings });
    }
    const { principal } = call;
    if (!principal) {
      const refused = credentialRefusedEntry('Batch job submission failed', 'slurm_submit_batch_job()');
      return sendSlurm(reply, CONTROLLER_REFUSED_STATUS, call.envelope('slurmctld', [refused]));
    }
    const association = ctx.associations.of(principal.user);
    let submitter: Submitter;
    if (principal.kind === 'bearer') {
      // The proxy's account binding: a bearer caller submits only as its token's account.
      const requested = decoded.request.account;
      if (flavor.kind === 'proxy' && requested && requested !== principal.account) {
        return proxyError(
          reply,
          403,
          'Forbidden',
          `account restriction: this token may only submit to account "${principal.account}", not "${requested}"`,
        );
      }
      submitter = {
        user: principal.user,
        userId: ctx.uidOf(principal.user),
        ...association,
        defaultAccount: flavor.kind === 'proxy' ? principal.account : (association.defaultAccount ?? principal.account),
      };
    } else {
      submitter = { user: principal.user, userId: principal.uid, ...association };
    }
    try {
      const job = cluster.submit(decoded.request, submitter);
      return sendSlurm(reply, 200, {
        job_id: job.jobId,
        step_id: 'batch',
        job_submit_user_msg: '',
        ...call.envelope('slurmctld', [], decoded.warnings),
      });
    } catch (error) {
      if (!(error instanceof SlurmError)) throw error;
      // A refusal by slurmctld comes back as HTTP 500 with the Slurm error in errors[].
      return sendSlurm(reply, 500, call.envelope('slurmctld', [slurmErrorEntry(error)], decoded.warnings));
    }
  });

  app.delete<{ Params: JobParams; Querystring: { signal?: string } }>(
    `${prefix}/:version/job/:job_id`,
    async (req, reply) => {
      const call = await admit(ctx, req, reply, 'sched:jobs:manage', flavor);
      if (!call) return reply;
      if (!ctx.upstream.slurmctld && flavor.kind === 'proxy') return upstreamDown(reply, 'slurmctld');
      const jobId = parseJobId(req.params.job_id);
      if (jobId === undefined) {
        const rejected = queryRejected(
          call,
          'slurmctld',
          'op_handler_job',
          'Rejecting request. Failure parsing parameters',
        );
        return sendSlurm(reply, rejected.status, rejected.body);
      }
      const signal = req.query.signal ? parseSignal(req.query.signal) : undefined;
      if (req.query.signal && signal === undefined) {
        return proxyError(reply, 400, 'Bad Request', `unknown signal "${req.query.signal}"`);
      }
      if (!ctx.upstream.slurmctld) {
        const unreachable = controllerUnreachable(call, 'cancel');
        return sendSlurm(reply, unreachable.status, unreachable.body);
      }
      const { principal } = call;
      if (!principal) {
        const refused = credentialRefusedEntry('Signal request failed', 'slurm_kill_jobs()');
        return sendSlurm(reply, CONTROLLER_REFUSED_STATUS, { status: [], ...call.envelope('slurmctld', [refused]) });
      }
      const job = cluster.getJob(jobId);
      const known = job && cluster.isInController(job) ? job : undefined;
      if (flavor.kind === 'proxy' && known && principal.kind === 'bearer' && known.account !== principal.account) {
        return proxyError(
          reply,
          403,
          'Forbidden',
          `account restriction: job ${known.jobId} belongs to account "${known.account}"; this token may only cancel jobs of account "${principal.account}"`,
        );
      }
      const result =
        signal && signal !== 'SIGKILL' && signal !== 'SIGTERM'
          ? cluster.signal(jobId, signal, principal.user)
          : cluster.cancel(jobId, principal.user);
      // Like slurmrestd: HTTP 200 even when the kill failed; the failure is in status[], with
      // the job id set only when slurmctld knew the job.
      const status = result.ok
        ? []
        : [
            {
              error: { string: result.error.message, code: result.error.errno, message: result.error.message },
              step_id: req.params.job_id,
              job_id: noVal(known ? jobId : null),
              federation: { sibling: '' },
            },
          ];
      return sendSlurm(reply, 200, { status, ...call.envelope('slurmctld') });
    },
  );

  app.get<{ Params: VersionParams }>(`${prefix}/:version/ping`, async (req, reply) => {
    const call = await admit(ctx, req, reply, 'sched:read', flavor);
    if (!call) return reply;
    return cachedGet(ctx, call, req, reply, 'ping', 'slurmctld', () => {
      // slurmrestd pings with the caller's credential: a slurmctld that is gone, or that refuses
      // the credential, reads as DOWN, still HTTP 200.
      const up = call.principal !== null && ctx.upstream.slurmctld;
      return {
        status: 200,
        body: {
          pings: [
            {
              hostname: ctx.config.nodeName,
              pinged: up ? 'UP' : 'DOWN',
              responding: up,
              latency: 150,
              mode: 'primary',
              primary: true,
            },
          ],
          ...call.envelope('slurmctld'),
        },
      };
    });
  });

  app.get<{ Params: VersionParams }>(`${prefix}/:version/partitions`, async (req, reply) => {
    const call = await admit(ctx, req, reply, 'sched:read', flavor);
    if (!call) return reply;
    return cachedGet(ctx, call, req, reply, 'partitions', 'slurmctld', () => {
      if (!ctx.upstream.slurmctld) return controllerUnreachable(call, 'partitions');
      // A refused credential: 511 with neither partitions nor an error entry, as 25.11.7 answers.
      if (!call.principal) return { status: CONTROLLER_REFUSED_STATUS, body: call.envelope('slurmctld') };
      return {
        status: 200,
        body: {
          partitions: ctx.config.partitions.map((p) => renderPartition(p, nodeView(ctx, req.params.version))),
          last_update: noVal(bootTime),
          ...call.envelope('slurmctld'),
        },
      };
    });
  });

  app.get<{ Params: NameParams }>(`${prefix}/:version/partition/:name`, async (req, reply) => {
    const call = await admit(ctx, req, reply, 'sched:read', flavor);
    if (!call) return reply;
    return cachedGet(ctx, call, req, reply, 'partitions', 'slurmctld', () => {
      if (!ctx.upstream.slurmctld) return controllerUnreachable(call, 'partitions');
      if (!call.principal) {
        const refused = credentialRefusedEntry('Unable to query partitions', 'op_handler_partition');
        return { status: CONTROLLER_REFUSED_STATUS, body: call.envelope('slurmctld', [refused]) };
      }
      const p = cluster.partition(req.params.name);
      if (!p) {
        return queryRejected(call, 'slurmctld', 'op_handler_partition', `Unable to find partition ${req.params.name}`);
      }
      return {
        status: 200,
        body: {
          partitions: [renderPartition(p, nodeView(ctx, req.params.version))],
          last_update: noVal(bootTime),
          ...call.envelope('slurmctld'),
        },
      };
    });
  });

  app.get<{ Params: VersionParams }>(`${prefix}/:version/nodes`, async (req, reply) => {
    const call = await admit(ctx, req, reply, 'sched:read', flavor);
    if (!call) return reply;
    return cachedGet(ctx, call, req, reply, 'nodes', 'slurmctld', () => {
      if (!ctx.upstream.slurmctld) return controllerUnreachable(call, 'nodes');
      if (!call.principal) {
        const refused = credentialRefusedEntry('Failure to query nodes', '_dump_nodes');
        return { status: CONTROLLER_REFUSED_STATUS, body: call.envelope('slurmctld', [refused]) };
      }
      return {
        status: 200,
        body: {
          nodes: [renderNode(nodeView(ctx, req.params.version))],
          last_update: noVal(bootTime),
          ...call.envelope('slurmctld'),
        },
      };
    });
  });

  app.get<{ Params: NameParams }>(`${prefix}/:version/node/:name`, async (req, reply) => {
    const call = await admit(ctx, req, reply, 'sched:read', flavor);
    if (!call) return reply;
    return cachedGet(ctx, call, req, reply, 'nodes', 'slurmctld', () => {
      if (!ctx.upstream.slurmctld) return controllerUnreachable(call, 'nodes');
      if (!call.principal) {
        const refused = credentialRefusedEntry(`Failure to query node ${req.params.name}`, '_dump_nodes');
        return { status: CONTROLLER_REFUSED_STATUS, body: call.envelope('slurmctld', [refused]) };
      }
      // 25.11.7 answers a node name it does not know with every node, HTTP 200, no error.
      return {
        status: 200,
        body: {
          nodes: [renderNode(nodeView(ctx, req.params.version))],
          last_update: noVal(bootTime),
          ...call.envelope('slurmctld'),
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

/**
 * The records an id names, as slurmctld reads it: an array's id names every record of the array
 * (its own first, then its tasks', newest first), a task's job id that task alone.
 */
function recordsFor(cluster: ProxyContext['cluster'], jobId: number): SimJob[] {
  const job = cluster.getJob(jobId);
  if (!job) return [];
  if (job.arrayJobId !== jobId) return [job];
  const tasks = cluster.arrayRecords(jobId).filter((record) => record !== job);
  return [job, ...tasks.reverse()];
}
