import { outputPaths } from '../job-process.js';
import { defaultOutputPattern, isArrayMeta, type SimJob } from '../sim-job.js';
import { type RenderContext, renderDerivedExitCode, renderExitCode } from './job-info.js';
import { noVal, templateFor } from './templates.js';

type Json = Record<string, unknown>;

/** `time.start` of a job slurmdbd recorded without ever getting its start (NO_VAL - 1). */
const UNPLACED_START = 4_294_967_294;

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
 * The batch step's `tres.requested` (slurmdbd's tres_usage_in), as jobacct_gather/linux fills it
 * once it has sampled the step: max and min with the task and node they were seen on, average
 * and total without; mem is MaxRSS in bytes, cpu the CPU time in milliseconds. Left as the
 * template has it (all empty) for a step that ended before its first sample.
 */
function stepRequested(template: Json, job: SimJob, nodeName: string): Json {
  if (job.peakMemoryBytes === null) return template;
  const usage = [
    { type: 'cpu', name: '', id: 1, count: Math.round((job.cpuUserSec + job.cpuSystemSec) * 1000) },
    { type: 'mem', name: '', id: 2, count: job.peakMemoryBytes },
    { type: 'energy', name: '', id: 3, count: 0 },
    { type: 'fs', name: 'disk', id: 6, count: 0 },
    { type: 'vmem', name: '', id: 7, count: job.peakMemoryBytes },
    { type: 'pages', name: '', id: 8, count: 0 },
  ];
  const where = usage.map((u) => ({ ...u, task: 0, node: nodeName }));
  return { ...template, max: where, min: where, average: usage, total: usage };
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
  const started = job.startTime > 0 && !job.unplaceable;
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
              requested: stepRequested((stepTemplate.tres as Json).requested as Json, job, ctx.nodeName),
              allocated: tres(job),
            },
          },
        ]
      : [];

  Object.assign(t, {
    account: job.account,
    ...(job.arrayJobId !== undefined && { array: renderSlurmdbArray(job, t.array as Json) }),
    comment: { administrator: '', job: job.comment, system: '' },
    allocation_nodes: started ? 1 : 0,
    association: { ...t.association, account: job.account, user: job.user },
    cluster: ctx.clusterName,
    derived_exit_code: renderDerivedExitCode(),
    time: {
      ...t.time,
      elapsed,
      eligible: job.eligibleTime,
      end,
      // slurmdbd never got a start for a job refused after its record was made: 0xFFFFFFFE there.
      start: job.unplaceable ? UNPLACED_START : job.startTime,
      submission: job.submitTime,
      limit,
      // Real slurmdbd 25.11 leaves the job's own CPU times at 0: its steps have them (captures).
      system: cpuTime(0),
      user: cpuTime(0),
      total: cpuTime(0),
    },
    // slurmdbd records a cancelled job's end when slurmctld accepts the cancel, before its batch
    // step is killed: the job's exit code stays 0 (the step's tells how it ended).
    exit_code:
      job.state === 'CANCELLED'
        ? renderDerivedExitCode()
        : job.unplaceable
          ? renderExitCode({ ...job, exitCode: 1, termSignal: null })
          : renderExitCode(job),
    flags: started ? ['STARTED_ON_SCHEDULE', 'START_RECEIVED'] : job.unplaceable ? ['START_RECEIVED'] : [],
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
    // slurmdbd keeps the reason a job waited for; one that started waited for nothing (None),
    // whatever slurmctld's state_reason says at its end (NonZeroExitCode, TimeLimit).
    state: { current: [job.state], reason: started || job.unplaceable ? 'None' : job.reason },
    steps,
    tres: { allocated: started ? tres(job) : [], requested: tres(job) },
    user: job.user,
    working_directory: job.cwd,
    stdout: job.standardOutput || defaultOutputPattern(job),
    stdout_expanded: paths.stdout,
    stderr: job.standardError,
    stderr_expanded: job.standardError ? paths.stderr : '',
  });
  return t;
}

/**
 * slurmdbd's `array` of an array job's record: the array's id, and either the task (a task's
 * record) or, for the array's own record while tasks are pending in it, those tasks as a hex
 * bitmap (`"0x3C"`: tasks 2 to 5) and the throttle (`limits.max.running.tasks`).
 */
function renderSlurmdbArray(job: SimJob, template: Json): Json {
  const meta = isArrayMeta(job);
  let bitmap = 0n;
  for (const task of job.arrayPending ?? []) bitmap |= 1n << BigInt(task);
  return {
    ...template,
    job_id: job.arrayJobId,
    limits: { max: { running: { tasks: meta ? (job.arrayThrottle ?? 0) : 0 } } },
    task_id: meta ? noVal(null) : noVal(job.arrayTaskId ?? null),
    task: meta ? `0x${bitmap.toString(16).toUpperCase()}` : '',
  };
}
