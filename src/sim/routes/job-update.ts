import type { FastifyInstance } from 'fastify';
import type { JobChange } from '../cluster.js';
import type { Flavor } from '../flavor.js';
import { admit, type ProxyContext, proxyError, sendSlurm, slurmErrorEntry, upstreamDown } from '../proxy-context.js';
import { SlurmError } from '../slurm-errno.js';
import { CONTROLLER_REFUSED_STATUS, credentialRefusedEntry, parseJobId, queryRejected } from '../slurmrestd-answers.js';
import { UNPARSABLE_BODY } from '../submit-request.js';

type JobParams = { version: string; job_id: string };
type Json = Record<string, unknown>;

const isObject = (value: unknown): value is Json =>
  typeof value === 'object' && value !== null && !Array.isArray(value);

/**
 * The members of an update's `job_desc_msg` the simulator applies (the same in v0.0.42 to
 * v0.0.44). A number object without `set: true` is no value, as slurmrestd reads it: real
 * 25.11.7 answers 200 to `time_limit: {number: 7}` and leaves the limit as it was.
 */
function decodeChange(body: unknown): JobChange {
  if (!isObject(body)) return {};
  const str = (key: string) => (typeof body[key] === 'string' ? (body[key] as string) : undefined);
  const limit = body.time_limit;
  const timeLimitMin =
    isObject(limit) && limit.set === true && typeof limit.number === 'number' ? limit.number : undefined;
  return {
    timeLimitMin,
    partition: str('partition'),
    qos: str('qos'),
    nice: typeof body.nice === 'number' ? body.nice : undefined,
    name: str('name'),
    comment: str('comment'),
    hold: typeof body.hold === 'boolean' ? body.hold : undefined,
  };
}

/**
 * `POST {prefix}/{v}/job/{job_id}`: a job update, answered as slurmrestd 25.11.7 answers it —
 * 200 `{results: null, errors: []}` when done; a refusal 500 with `errors[0]` (source
 * `slurm_update_job2()`, description "Job update requested failed"); an unknown job 404 with
 * 2017; an id it cannot parse 422 with 9000. The proxy adds its own account binding, as for cancel.
 */
export function registerJobUpdateRoute(app: FastifyInstance, ctx: ProxyContext, flavor: Flavor): void {
  const { cluster } = ctx;
  app.post<{ Params: JobParams; Body: unknown }>(`${flavor.controller}/:version/job/:job_id`, async (req, reply) => {
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
    if (req.body === UNPARSABLE_BODY) {
      const rejected = queryRejected(
        call,
        'slurmctld',
        'op_handler_job',
        'Rejecting request. Failure parsing parameters',
      );
      return sendSlurm(reply, rejected.status, rejected.body);
    }
    if (!ctx.upstream.slurmctld) {
      const error = new SlurmError(
        'SLURMCTLD_COMMUNICATIONS_CONNECTION_ERROR',
        'Job update requested failed',
        'slurm_update_job2()',
      );
      return sendSlurm(reply, 502, { results: null, ...call.envelope('slurmctld', [slurmErrorEntry(error)]) });
    }
    const { principal } = call;
    if (!principal) {
      const refused = credentialRefusedEntry('Job update requested failed', 'slurm_update_job2()');
      return sendSlurm(reply, CONTROLLER_REFUSED_STATUS, { results: null, ...call.envelope('slurmctld', [refused]) });
    }
    const job = cluster.getJob(jobId);
    const known = job && cluster.isInController(job) ? job : undefined;
    if (flavor.kind === 'proxy' && known && principal.kind === 'bearer' && known.account !== principal.account) {
      return proxyError(
        reply,
        403,
        'Forbidden',
        `account restriction: job ${known.jobId} belongs to account "${known.account}"; this token may only update jobs of account "${principal.account}"`,
      );
    }
    const adminLevel = ctx.config.users[principal.user]?.adminLevel ?? 'None';
    try {
      cluster.update(jobId, decodeChange(req.body), { user: principal.user, operator: adminLevel !== 'None' });
      return sendSlurm(reply, 200, { results: null, ...call.envelope('slurmctld') });
    } catch (error) {
      if (!(error instanceof SlurmError)) throw error;
      // An unknown job is refused before slurmctld is asked to change anything: 404, no results.
      if (error.errnoName === 'ESLURM_INVALID_JOB_ID') {
        return sendSlurm(reply, 404, call.envelope('slurmctld', [slurmErrorEntry(error)]));
      }
      return sendSlurm(reply, 500, { results: null, ...call.envelope('slurmctld', [slurmErrorEntry(error)]) });
    }
  });
}
