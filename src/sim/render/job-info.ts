import { formatIndexes } from '../../sched/job-array.js';
import type { ApiVersion } from '../../sched/versions.js';
import { signalName } from '../cluster.js';
import { outputPaths } from '../job-process.js';
import { defaultOutputPattern, isArrayMeta, type SimJob } from '../sim-job.js';
import { noVal, templateFor } from './templates.js';

export interface RenderContext {
  version: ApiVersion;
  clusterName: string;
  nodeName: string;
}

type Json = Record<string, unknown>;

/** Slurm's `exit_code` / `derived_exit_code` object. */
export function renderExitCode(job: SimJob): Json {
  if (job.termSignal !== null) {
    return {
      status: ['SIGNALED'],
      return_code: noVal(null),
      signal: { id: noVal(job.termSignal), name: signalName(job.termSignal) },
    };
  }
  const code = job.exitCode ?? 0;
  return {
    status: [code === 0 ? 'SUCCESS' : 'ERROR'],
    return_code: noVal(code),
    signal: { id: noVal(null), name: '' },
  };
}

/**
 * `derived_exit_code`: the highest exit code of the job's steps other than the batch step
 * (its srun steps). The simulator runs batch scripts only, so it is always a success, as a
 * real Slurm reports it for a batch job that ran no srun, however the script itself ended.
 */
export function renderDerivedExitCode(): Json {
  return { status: ['SUCCESS'], return_code: noVal(0), signal: { id: noVal(null), name: '' } };
}

function memoryMbPerNode(job: SimJob): number {
  // Without a request, slurmctld applies DefMemPerCPU; the captured cluster used 256 MB.
  return job.memoryPerNodeMb ?? 256 * job.tasks * job.cpusPerTask;
}

export function tresString(job: SimJob): string {
  const cpus = job.tasks * job.cpusPerTask;
  return `cpu=${cpus},mem=${memoryMbPerNode(job)}M,node=1,billing=${cpus}`;
}

function setIfPresent(target: Json, key: string, value: unknown): void {
  if (key in target) target[key] = value;
}

/** One element of `jobs[]` in `GET /sched/{v}/jobs` and `/job/{id}`. */
export function renderJobInfo(job: SimJob, ctx: RenderContext): Json {
  const t = structuredClone(templateFor(ctx.version).job);
  // A job refused after its record was made has a start time but never ran anywhere.
  const started = job.startTime > 0 && !job.unplaceable;
  const cpus = job.tasks * job.cpusPerTask;
  const paths = outputPaths(job, ctx.nodeName);
  const timeLimit = job.timeLimitMin === null ? noVal(null, true) : noVal(job.timeLimitMin);
  // A running job's end_time is when its limit will expire, as slurmctld reports it.
  const expectedEnd =
    job.endTime > 0 ? job.endTime : started && job.timeLimitMin !== null ? job.startTime + job.timeLimitMin * 60 : 0;

  Object.assign(t, {
    account: job.account,
    ...(job.arrayJobId !== undefined && {
      array_job_id: noVal(job.arrayJobId),
      array_task_id: noVal(job.arrayTaskId ?? null),
      // The tasks still pending in the array's own record (`2-5%2`); '' for a task's record.
      array_task_string: isArrayMeta(job)
        ? `${formatIndexes(job.arrayPending ?? [])}${job.arrayThrottle ? `%${job.arrayThrottle}` : ''}`
        : '',
      array_max_tasks: noVal(job.arrayThrottle ?? 0),
    }),
    accrue_time: noVal(job.eligibleTime),
    allocating_node: ctx.nodeName,
    batch_host: started ? ctx.nodeName : '',
    cluster: ctx.clusterName,
    comment: job.comment,
    cpus_per_task: noVal(job.cpusPerTask),
    cpus: noVal(cpus),
    current_working_directory: job.cwd,
    dependency: job.dependency,
    derived_exit_code: renderDerivedExitCode(),
    eligible_time: noVal(job.eligibleTime),
    end_time: noVal(expectedEnd),
    exit_code: renderExitCode(job),
    group_id: job.userId,
    group_name: job.user,
    job_id: job.jobId,
    job_state: stateFlags(job),
    last_sched_evaluation: noVal(started ? job.startTime : job.submitTime),
    mail_user: job.user,
    memory_per_cpu: job.memoryPerNodeMb === null ? noVal(256) : noVal(null),
    memory_per_node: job.memoryPerNodeMb === null ? noVal(null) : noVal(job.memoryPerNodeMb),
    minimum_cpus_per_node: noVal(cpus),
    name: job.name,
    nodes: job.nodes,
    node_count: noVal(1),
    partition: job.partition,
    // A held job's priority is 0, running or not (real 25.11.7: `hold: true`, JobHeldUser).
    priority: noVal(job.held ? 0 : job.state === 'PENDING' ? 1 : 0),
    hold: job.held === true,
    nice: job.nice ?? 0,
    qos: job.qos ?? 'normal',
    start_time: noVal(job.startTime),
    state_reason: job.reason,
    standard_error: job.standardError,
    submit_time: noVal(job.submitTime),
    tasks: noVal(job.tasks),
    time_limit: timeLimit,
    tres_req_str: tresString(job),
    tres_alloc_str: started ? tresString(job) : '',
    user_id: job.userId,
    user_name: job.user,
  });
  if (ctx.version === 'v0.0.42') {
    // v0.0.42 reports the expanded path in standard_output and has no *_expanded members.
    t.standard_output = paths.stdout;
    t.standard_error = job.standardError ? paths.stderr : '';
  } else {
    t.standard_output = job.standardOutput || defaultOutputPattern(job);
    setIfPresent(t, 'stdout_expanded', paths.stdout);
    setIfPresent(t, 'stderr_expanded', job.standardError ? paths.stderr : '');
  }
  if (t.step_id && typeof t.step_id === 'object') {
    t.step_id = { ...(t.step_id as Json), job_id: noVal(job.jobId), sluid: `s${job.jobId.toString(36).toUpperCase()}` };
  }
  t.job_resources = started ? renderJobResources(t.job_resources as Json, job, ctx) : null;
  return t;
}

function renderJobResources(template: Json, job: SimJob, ctx: RenderContext): Json {
  const cpus = job.tasks * job.cpusPerTask;
  const nodes = structuredClone(template.nodes) as Json & { allocation: Json[] };
  nodes.list = ctx.nodeName;
  nodes.allocation = nodes.allocation.map((a) => ({
    ...a,
    name: ctx.nodeName,
    cpus: { count: cpus, used: 0 },
    memory: { used: 0, allocated: memoryMbPerNode(job) },
  }));
  return { ...template, nodes, cpus };
}

/**
 * One element of `GET /slurm/{v}/jobs/state`, as slurmrestd really sends it: the id as a
 * string and the flags under `state`, nothing else (not the `job_info` its document names).
 */
export function renderJobState(job: SimJob): Json[] {
  // An array's tasks are `<job id>_<task id>`, each task still pending in the array's own
  // record an entry of its own (test/fixtures/real-slurm-25.11/array_jobs_state_*).
  if (job.arrayJobId === undefined) return [{ job_id: String(job.jobId), state: stateFlags(job) }];
  const tasks = job.arrayTaskId === undefined ? (job.arrayPending ?? []) : [job.arrayTaskId];
  return tasks.map((task) => ({ job_id: `${job.jobId}_${task}`, state: stateFlags(job) }));
}

function stateFlags(job: SimJob): string[] {
  return job.completing ? [job.state, 'COMPLETING'] : [job.state];
}
