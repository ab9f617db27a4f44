import { outputPaths } from '../job-process.js';
import type { SimJob } from '../sim-job.js';
import { type RenderContext, renderExitCode } from './job-info.js';
import { noVal, templateFor } from './templates.js';

type Json = Record<string, unknown>;

function tres(job: SimJob): Json[] {
  const cpus = job.tasks * job.cpusPerTask;
  const mem = job.memoryPerNodeMb ?? 256 * cpus;
  return [
    { type: 'cpu', name: '', id: 1, count: cpus },
    { type: 'mem', name: '', id: 2, count: mem },
    { type: 'node', name: '', id: 4, count: 1 },
    { type: 'billing', name: '', id: 5, count: cpus },
  ];
}

/**
 * The batch step's `tres.requested` (slurmdbd's tres_usage_in): its `max` mem entry is MaxRSS in
 * bytes. Left as the template has it (`max: []`, a cluster without jobacct_gather) when not measured.
 */
function stepRequested(template: Json, job: SimJob): Json {
  if (job.peakMemoryBytes === null) return template;
  return { ...template, max: [{ type: 'mem', name: '', id: 2, count: job.peakMemoryBytes }] };
}

function cpuTime(seconds: number): { seconds: number; microseconds: number } {
  const whole = Math.floor(seconds);
  return { seconds: whole, microseconds: Math.round((seconds - whole) * 1e6) };
}

/** One element of `jobs[]` in `GET /scheddb/{v}/jobs` and `/job/{id}` (slurmdbd's view). */
export function renderSlurmdbJob(job: SimJob, ctx: RenderContext, nowSec: number): Json {
  const t = structuredClone(templateFor(ctx.version).slurmdbJob) as Json & {
    time: Json;
    steps: Json[];
    association: Json;
    required: Json;
  };
  const started = job.startTime > 0;
  const end = job.endTime;
  const elapsed = started ? (end > 0 ? end : nowSec) - job.startTime : 0;
  const cpus = job.tasks * job.cpusPerTask;
  const paths = outputPaths(job, ctx.nodeName);
  const limit = job.timeLimitMin === null ? noVal(null, true) : noVal(job.timeLimitMin);
  const user = cpuTime(job.cpuUserSec);
  const system = cpuTime(job.cpuSystemSec);
  const total = cpuTime(job.cpuUserSec + job.cpuSystemSec);

  const stepTemplate = t.steps[0];
  const steps =
    started && stepTemplate
      ? [
          {
            ...structuredClone(stepTemplate),
            time: {
              ...(stepTemplate.time as Json),
              elapsed,
              start: noVal(job.startTime),
              end: noVal(end > 0 ? end : null),
              system,
              user,
              total,
            },
            exit_code: renderExitCode(job),
            nodes: { count: 1, range: ctx.nodeName, list: [ctx.nodeName] },
            tasks: { count: job.tasks },
            state: [job.state === 'PENDING' ? 'RUNNING' : job.state],
            step: { ...(stepTemplate.step as Json), id: `${job.jobId}.batch`, name: 'batch' },
            tres: {
              ...(stepTemplate.tres as Json),
              requested: stepRequested((stepTemplate.tres as Json).requested as Json, job),
              allocated: tres(job),
            },
          },
        ]
      : [];

  Object.assign(t, {
    account: job.account,
    comment: { administrator: '', job: job.comment, system: '' },
    allocation_nodes: started ? 1 : 0,
    association: { ...t.association, account: job.account, user: job.user },
    cluster: ctx.clusterName,
    derived_exit_code: renderExitCode(job),
    time: {
      ...t.time,
      elapsed,
      eligible: job.eligibleTime,
      end,
      start: job.startTime,
      submission: job.submitTime,
      limit,
      system,
      user,
      total,
    },
    exit_code: renderExitCode(job),
    flags: started ? ['STARTED_ON_SCHEDULE', 'START_RECEIVED'] : [],
    group: job.user,
    job_id: job.jobId,
    name: job.name,
    nodes: started ? ctx.nodeName : 'None assigned',
    partition: job.partition,
    required: {
      ...t.required,
      CPUs: cpus,
      memory_per_cpu: job.memoryPerNodeMb === null ? noVal(256) : noVal(null),
      memory_per_node: job.memoryPerNodeMb === null ? noVal(null) : noVal(job.memoryPerNodeMb),
    },
    state: { current: [job.state], reason: job.reason },
    steps,
    tres: { allocated: started ? tres(job) : [], requested: tres(job) },
    user: job.user,
    working_directory: job.cwd,
    stdout: job.standardOutput || 'slurm-%j.out',
    stdout_expanded: paths.stdout,
    stderr: job.standardError,
    stderr_expanded: job.standardError ? paths.stderr : '',
  });
  return t;
}
