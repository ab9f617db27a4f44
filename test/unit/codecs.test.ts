import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { codecFor } from '../../src/sched/codecs/codec.js';
import { phaseOf, stateOf } from '../../src/sched/codecs/common.js';
import { isTerminalState, JOB_STATES, JobDecodeError, type SchedJob } from '../../src/sched/job-model.js';
import { DEFAULT_ENVIRONMENT, type JobSpecInput, jobSpecSchema } from '../../src/sched/job-spec.js';
import { validateAgainstSpec } from '../../src/sched/spec-validator.js';
import { SUPPORTED_VERSIONS } from '../../src/sched/versions.js';
import { renderJobInfo } from '../../src/sim/render/job-info.js';
import { renderSlurmdbJob } from '../../src/sim/render/slurmdb-job.js';
import type { SimJob } from '../../src/sim/sim-job.js';

type Json = Record<string, unknown>;

function fixture(name: string): Json[] {
  const url = new URL(`../fixtures/real-slurm-25.11/${name}`, import.meta.url);
  return (JSON.parse(readFileSync(url, 'utf8')) as { jobs: Json[] }).jobs;
}

function byId(jobs: Json[], id: number): Json {
  const job = jobs.find((j) => j.job_id === id);
  if (!job) throw new Error(`fixture has no job ${id}`);
  return structuredClone(job);
}

function decodeError(decode: () => unknown): JobDecodeError {
  try {
    decode();
  } catch (error) {
    if (error instanceof JobDecodeError) return error;
    throw error;
  }
  throw new Error('decoding did not fail');
}

const SUBMIT = 1795319198;
const NO_VAL = { set: false, infinite: false, number: 0 };
const set = (number: number) => ({ set: true, infinite: false, number });

/** What both views of the captured cluster say about the two jobs they share. */
const SHARED: Record<number, Partial<SchedJob>> = {
  25110008: {
    name: 'sample',
    state: 'COMPLETED',
    state_flags: ['COMPLETED'],
    reason: null,
    exit_code: 0,
    signal: null,
    submit_time: SUBMIT,
    start_time: SUBMIT,
    end_time: SUBMIT + 4,
    elapsed_sec: 4,
    time_limit: { minutes: 5 },
    partition: 'debug',
    account: 'lab',
    user: 'alice',
    comment: '',
    array_job_id: null,
    array_task_id: null,
    nodes: 'localhost',
    cpus: 1,
    memory_per_node_mb: 256,
    working_directory: '/tmp',
    stdout_path: '/tmp/slurm-25110008.out',
    stderr_path: null,
  },
  25110009: {
    name: 'sample-cancel',
    state: 'CANCELLED',
    exit_code: null,
    signal: { id: 15, name: 'TERM' },
    start_time: SUBMIT,
    end_time: SUBMIT + 1,
    elapsed_sec: 1,
    nodes: 'localhost',
    stdout_path: '/tmp/slurm-25110009.out',
  },
};

describe.each(SUPPORTED_VERSIONS)('codec %s', (version) => {
  const codec = codecFor(version);
  const controller = fixture(`sched_jobs_${version}.json`);
  const accounting = fixture(`scheddb_jobs_${version}.json`);
  const decoded = controller.map((job) => codec.decodeControllerJob(job));

  it('is the codec of its version', () => {
    expect(codec.version).toBe(version);
  });

  it('decodes every job of the real controller listing', () => {
    expect(decoded.map((j) => j.job_id)).toEqual([
      25110001, 25110002, 25110003, 25110004, 25110005, 25110006, 25110007, 25110008, 25110009,
    ]);
    for (const job of decoded) {
      expect(job.source).toBe('controller');
      expect(job.cpu_time_sec).toBeNull();
      // v0.0.42 keeps the expanded path in standard_output, later versions in stdout_expanded.
      expect(job.stdout_path).toBe(`/tmp/slurm-${job.job_id}.out`);
    }
    expect(decoded.map((j) => j.state)).toEqual([
      'COMPLETED',
      'COMPLETED',
      'CANCELLED',
      'COMPLETED',
      'CANCELLED',
      'CANCELLED',
      'CANCELLED',
      'COMPLETED',
      'CANCELLED',
    ]);
  });

  it('reads the finished and the cancelled sample jobs', () => {
    expect(codec.decodeControllerJob(byId(controller, 25110008))).toMatchObject(SHARED[25110008] ?? {});
    expect(codec.decodeControllerJob(byId(controller, 25110009))).toMatchObject(SHARED[25110009] ?? {});
  });

  it('gives a job cancelled before it ran no start, run time or exit status', () => {
    // slurmctld stamps start_time = end_time on it; it never had nodes.
    expect(codec.decodeControllerJob(byId(controller, 25110003))).toMatchObject({
      name: 'smoke-long',
      state: 'CANCELLED',
      submit_time: 1795319144,
      start_time: null,
      end_time: 1795319144,
      elapsed_sec: null,
      nodes: null,
      exit_code: null,
      signal: null,
      cpus: 1,
    });
    expect(codec.decodeControllerJob(byId(controller, 25110005))).toMatchObject({
      reason: 'PartitionConfig',
      user: 'bob',
      account: 'other',
      partition: 'lab-owner',
      start_time: null,
      end_time: 1795319185,
    });
  });

  it('decodes both jobs of the real accounting listing', () => {
    const jobs = accounting.map((job) => codec.decodeAccountingJob(job));
    expect(jobs.map((j) => [j.job_id, j.source])).toEqual([
      [25110008, 'accounting'],
      [25110009, 'accounting'],
    ]);
    expect(jobs[0]).toMatchObject(SHARED[25110008] ?? {});
    // The job record says SUCCESS; the batch step says what ended the script.
    expect(jobs[1]).toMatchObject(SHARED[25110009] ?? {});
    // The job's own time.total is 0; its batch step used 4511 and 3779 microseconds.
    expect(jobs[0]?.cpu_time_sec).toBeCloseTo(0.004511, 9);
    expect(jobs[1]?.cpu_time_sec).toBeCloseTo(0.003779, 9);
    // That cluster gathers no job accounting: its steps' `tres.requested.max` is empty, so the peak is unknown.
    expect(jobs.map((j) => j.peak_memory_mb)).toEqual([null, null]);
  });

  it("reads the peak memory from the steps' MaxRSS, in MB rounded up", () => {
    const raw = byId(accounting, 25110008);
    const [batch] = raw.steps as Json[];
    if (!batch) throw new Error('fixture job has no step');
    const withMax = (step: Json, bytes: number): Json => {
      const tres = step.tres as { requested: Json };
      const max = [
        { type: 'cpu', name: '', id: 1, count: 9 },
        { type: 'mem', name: '', id: 2, count: bytes },
      ];
      return { ...step, tres: { ...tres, requested: { ...tres.requested, max } } };
    };
    const extern = { ...withMax(batch, 4 * 2 ** 20), step: { ...(batch.step as Json), name: 'extern' } };
    raw.steps = [withMax(batch, 60 * 2 ** 20 + 1), extern];
    expect(codec.decodeAccountingJob(raw).peak_memory_mb).toBe(61);
    // A step without the entry, or without tres at all, says nothing; it is no decode error.
    raw.steps = [batch, { ...extern, tres: undefined }];
    expect(codec.decodeAccountingJob(raw).peak_memory_mb).toBeNull();
    raw.steps = [withMax(batch, 0)];
    expect(codec.decodeAccountingJob(raw).peak_memory_mb).toBe(0);
  });

  it('agrees with the controller on the jobs both views hold', () => {
    for (const id of [25110008, 25110009]) {
      const { source: _a, cpu_time_sec: _b, ...fromController } = codec.decodeControllerJob(byId(controller, id));
      const { source: _c, cpu_time_sec: _d, ...fromAccounting } = codec.decodeAccountingJob(byId(accounting, id));
      expect(fromAccounting).toEqual(fromController);
    }
  });

  it('keeps state flags and takes the first base state', () => {
    const raw = { ...byId(controller, 25110008), job_state: ['PENDING', 'REQUEUED'] };
    const job = codec.decodeControllerJob(raw);
    expect(job.state).toBe('PENDING');
    expect(job.state_flags).toEqual(['PENDING', 'REQUEUED']);
    // A pending job's start_time is the scheduler's forecast and its exit status is old news.
    expect(job.start_time).toBeNull();
    expect(job.exit_code).toBeNull();
  });

  it('drops the forecast end of a running job', () => {
    const raw = { ...byId(controller, 25110008), job_state: ['RUNNING'], end_time: set(SUBMIT + 300) };
    expect(codec.decodeControllerJob(raw)).toMatchObject({
      state: 'RUNNING',
      start_time: SUBMIT,
      end_time: null,
      elapsed_sec: null,
      exit_code: null,
    });
  });

  it('maps a state it does not know to UNKNOWN', () => {
    const job = codec.decodeControllerJob({ ...byId(controller, 25110008), job_state: ['TELEPORTING'] });
    expect(job.state).toBe('UNKNOWN');
    expect(job.state_flags).toEqual(['TELEPORTING']);
    const db = codec.decodeAccountingJob({ ...byId(accounting, 25110008), state: { current: [], reason: 'None' } });
    expect(db.state).toBe('UNKNOWN');
  });

  it('decodes /jobs/state as real slurmrestd sends it: the id a string, the flags under state', () => {
    const url = new URL(`../fixtures/real-slurm-25.11/jobs_state_${version}.json`, import.meta.url);
    const body = JSON.parse(readFileSync(url, 'utf8')) as { jobs: unknown[] };
    expect(body.jobs.map((j) => codec.decodeJobState(j))).toEqual([
      { job_id: 25110018, array_task_id: null, state: 'RUNNING', state_flags: ['RUNNING'] },
      { job_id: 25110019, array_task_id: null, state: 'RUNNING', state_flags: ['RUNNING'] },
    ]);
    expect(codec.decodeJobState({ job_id: '7', state: ['PENDING', 'REQUEUED'] })).toEqual({
      job_id: 7,
      array_task_id: null,
      state: 'PENDING',
      state_flags: ['PENDING', 'REQUEUED'],
    });
    // An array's task: `<job id>_<task id>` (test/fixtures/real-slurm-25.11/array_jobs_state_*).
    expect(codec.decodeJobState({ job_id: '5_3', state: ['RUNNING'] })).toMatchObject({ job_id: 5, array_task_id: 3 });
    expect(decodeError(() => codec.decodeJobState({ job_id: 'x7', state: ['RUNNING'] })).path).toBe('job_id');
    // The document's job_info shape (job_state) is not what the endpoint sends.
    expect(decodeError(() => codec.decodeJobState({ job_id: 42, job_state: ['RUNNING'] })).path).toBe('state');
  });

  it('reads null members as absent', () => {
    const raw = { ...byId(controller, 25110008), comment: null, nodes: null, time_limit: null, job_resources: null };
    expect(codec.decodeControllerJob(raw)).toMatchObject({ comment: '', nodes: null, time_limit: null });
  });

  it('reads an unlimited time limit and array ids', () => {
    const raw = {
      ...byId(controller, 25110008),
      time_limit: { set: false, infinite: true, number: 0 },
      array_job_id: set(25110100),
      array_task_id: set(0),
    };
    expect(codec.decodeControllerJob(raw)).toMatchObject({
      time_limit: 'infinite',
      array_job_id: 25110100,
      array_task_id: 0,
    });
    const db = { ...byId(accounting, 25110008), array: { job_id: 25110100, task_id: set(3) } };
    expect(codec.decodeAccountingJob(db)).toMatchObject({ array_job_id: 25110100, array_task_id: 3 });
  });

  it('reads memory per node when it is set', () => {
    const raw = { ...byId(controller, 25110008), memory_per_node: set(4096), memory_per_cpu: NO_VAL };
    expect(codec.decodeControllerJob(raw).memory_per_node_mb).toBe(4096);
  });

  it('accepts the flat state_current of the proxy document', () => {
    const { state: _state, ...flat } = byId(accounting, 25110008);
    expect(codec.decodeAccountingJob({ ...flat, state_current: ['COMPLETED'] }).state).toBe('COMPLETED');
    expect(codec.decodeAccountingJob({ ...flat, state_current: 'RUNNING' }).state).toBe('RUNNING');
  });

  it('names the missing member that identifies a job', () => {
    const { job_id: _id, ...noId } = byId(controller, 25110008);
    expect(decodeError(() => codec.decodeControllerJob(noId)).path).toBe('job_id');
    const { job_state: _s, ...noState } = byId(controller, 25110008);
    expect(decodeError(() => codec.decodeControllerJob(noState)).path).toBe('job_state');
    expect(decodeError(() => codec.decodeControllerJob({ ...noState, job_id: null, job_state: [] })).path).toBe(
      'job_id',
    );
    const { job_id: _dbId, ...dbNoId } = byId(accounting, 25110008);
    expect(decodeError(() => codec.decodeAccountingJob(dbNoId)).path).toBe('job_id');
    const { state: _dbState, ...dbNoState } = byId(accounting, 25110008);
    const error = decodeError(() => codec.decodeAccountingJob(dbNoState));
    expect(error.path).toBe('state.current');
    expect(error.message).toMatch(/^state\.current: /);
  });

  it('names a member of the wrong type, however deep', () => {
    const raw = byId(accounting, 25110008);
    (raw.time as Json).limit = { set: true, number: 'five' };
    expect(decodeError(() => codec.decodeAccountingJob(raw)).path).toBe('time.limit.number');
    expect(decodeError(() => codec.decodeControllerJob('not a job')).path).toBe('job');
  });
});

describe('a job killed for its memory by real Slurm 25.11.7 with task/cgroup (captured)', () => {
  const codec = codecFor('v0.0.44');
  // sbatch --mem=64M of a script holding 200 MB; slurmctld: JobState=OUT_OF_MEMORY ExitCode=0:125.
  const expected = { job_id: 2, state: 'OUT_OF_MEMORY', exit_code: null, signal: { id: 125, name: '125' } };

  it('reads OUT_OF_MEMORY, no return code and signal 125 from the controller, with its reason', () => {
    expect(codec.decodeControllerJob(byId(fixture('oom_job_v0.0.44.json'), 2))).toMatchObject({
      ...expected,
      reason: 'OutOfMemory',
      memory_per_node_mb: 64,
    });
  });

  it("reads the same from accounting, with the controller's reason for the end (accounting keeps None)", () => {
    const job = byId(fixture('oom_slurmdb_job_v0.0.44.json'), 2);
    expect((job.state as { reason: string }).reason).toBe('None');
    expect(codec.decodeAccountingJob(job)).toMatchObject({
      ...expected,
      reason: 'OutOfMemory',
      memory_per_node_mb: 64,
    });
  });
});

describe('state mapping', () => {
  it('takes the first base state among the flags', () => {
    expect(stateOf(['PENDING', 'REQUEUED'])).toBe('PENDING');
    expect(stateOf(['REQUEUED', 'PENDING'])).toBe('PENDING');
    expect(stateOf(['COMPLETED', 'COMPLETING'])).toBe('COMPLETED');
    expect(stateOf(['COMPLETING'])).toBe('UNKNOWN');
    expect(stateOf([])).toBe('UNKNOWN');
  });

  it('calls exactly the terminal states ended', () => {
    for (const state of JOB_STATES) {
      expect(phaseOf(state) === 'ended', state).toBe(isTerminalState(state));
    }
    expect(phaseOf('PENDING')).toBe('waiting');
    expect(phaseOf('SUSPENDED')).toBe('active');
  });
});

function simJob(overrides: Partial<SimJob>): SimJob {
  return {
    jobId: 1000,
    name: 'sim',
    user: 'alice',
    userId: 1003,
    account: 'lab',
    partition: 'debug',
    comment: 'from the simulator',
    script: '#!/bin/sh\nsleep 60\n',
    environment: ['PATH=/usr/bin:/bin'],
    cwd: '/tmp',
    tasks: 2,
    cpusPerTask: 1,
    memoryPerNodeMb: 1024,
    timeLimitMin: 10,
    dependency: '',
    standardOutput: '',
    standardError: 'err-%j.log',
    state: 'RUNNING',
    reason: 'None',
    submitTime: 1_800_000_000,
    eligibleTime: 1_800_000_000,
    startTime: 1_800_000_010,
    endTime: 0,
    exitCode: null,
    termSignal: null,
    cpuUserSec: 1.5,
    cpuSystemSec: 0.25,
    peakMemoryBytes: null,
    nodes: 'sim-node',
    lastUpdate: 1_800_000_010,
    ...overrides,
  };
}

describe.each(SUPPORTED_VERSIONS)('what the simulator sends, %s', (version) => {
  const codec = codecFor(version);
  const ctx = { version, clusterName: 'sim', nodeName: 'sim-node' };

  it('decodes a running job', () => {
    const job = simJob({});
    expect(codec.decodeControllerJob(renderJobInfo(job, ctx))).toMatchObject({
      state: 'RUNNING',
      start_time: 1_800_000_010,
      end_time: null,
      comment: 'from the simulator',
      cpus: 2,
      memory_per_node_mb: 1024,
      time_limit: { minutes: 10 },
      stdout_path: '/tmp/slurm-1000.out',
      stderr_path: '/tmp/err-1000.log',
    });
    const db = codec.decodeAccountingJob(renderSlurmdbJob(job, ctx, 1_800_000_070));
    expect(db).toMatchObject({ state: 'RUNNING', elapsed_sec: 60, end_time: null, cpus: 2, exit_code: null });
    expect(db.cpu_time_sec).toBeCloseTo(1.75, 9);
  });

  it('decodes a pending job that has no nodes yet', () => {
    const job = simJob({ state: 'PENDING', reason: 'Resources', startTime: 0, nodes: '', timeLimitMin: null });
    expect(codec.decodeControllerJob(renderJobInfo(job, ctx))).toMatchObject({
      reason: 'Resources',
      start_time: null,
      nodes: null,
      time_limit: 'infinite',
    });
    expect(codec.decodeAccountingJob(renderSlurmdbJob(job, ctx, 1_800_000_070))).toMatchObject({
      reason: 'Resources',
      start_time: null,
      elapsed_sec: null,
      nodes: null,
      cpu_time_sec: null,
    });
  });

  it("sends a pending job's forecast as its start_time, and that + its limit as its end_time, as Slurm 25.11.7", () => {
    const base = { state: 'PENDING', startTime: 0, nodes: '' } as const;
    const waiting = renderJobInfo(simJob({ ...base, reason: 'Resources', expectedStart: 1_800_000_600 }), ctx);
    expect(waiting.start_time).toEqual(set(1_800_000_600));
    expect(waiting.end_time).toEqual(set(1_800_000_600 + 600));
    expect(codec.decodeControllerJob(waiting)).toMatchObject({ start_time: null, expected_start: 1_800_000_600 });
    // Held: no forecast, start_time 0 (pending_held_v0.0.44.json).
    const held = renderJobInfo(simJob({ ...base, reason: 'JobHeldUser', held: true }), ctx);
    expect(codec.decodeControllerJob(held)).toMatchObject({ reason: 'JobHeldUser', expected_start: null });
  });

  it('decodes a failed job', () => {
    const job = simJob({ state: 'FAILED', reason: 'NonZeroExitCode', endTime: 1_800_000_040, exitCode: 3 });
    const expected = { state: 'FAILED', exit_code: 3, signal: null, elapsed_sec: 30 };
    expect(codec.decodeControllerJob(renderJobInfo(job, ctx))).toMatchObject({
      ...expected,
      reason: 'NonZeroExitCode',
    });
    // slurmdbd keeps the reason a job waited for (None once it ran), not why it ended; the decoder
    // gives the failure the reason slurmctld would, so the history reads the same from either source.
    const record = renderSlurmdbJob(job, ctx, 1_800_000_070);
    expect((record.state as { reason: string }).reason).toBe('None');
    expect(codec.decodeAccountingJob(record)).toMatchObject({ ...expected, reason: 'NonZeroExitCode' });
  });

  it("sends the measured peak as the batch step's MaxRSS, valid against the schema", () => {
    const ended = { state: 'COMPLETED' as const, endTime: 1_800_000_040, exitCode: 0 };
    const measured = renderSlurmdbJob(simJob({ ...ended, peakMemoryBytes: 50 * 2 ** 20 }), ctx, 1_800_000_070);
    const [step] = measured.steps as { tres: { requested: { max: unknown[] } } }[];
    // As jobacct_gather/linux fills it: every TRES it samples, with the task and node of the maximum.
    expect(step?.tres.requested.max).toContainEqual({
      type: 'mem',
      name: '',
      id: 2,
      count: 50 * 2 ** 20,
      task: 0,
      node: ctx.nodeName,
    });
    expect(validateAgainstSpec(version, 'openapi_slurmdbd_jobs_resp', { jobs: [measured] }).errors).toEqual([]);
    expect(codec.decodeAccountingJob(measured).peak_memory_mb).toBe(50);
    const unmeasured = renderSlurmdbJob(simJob(ended), ctx, 1_800_000_070);
    expect(codec.decodeAccountingJob(unmeasured).peak_memory_mb).toBeNull();
  });
});

const FULL_SPEC: JobSpecInput = {
  name: 'nightly',
  script: '#!/bin/bash\necho hi\n',
  partition: 'debug',
  account: 'lab',
  environment: { HOME: '/home/alice', THREADS: 4, DEBUG: true },
  current_working_directory: '/tmp',
  tasks: 2,
  cpus_per_task: 2,
  memory_per_node: '4G',
  time_limit: '1:30:00',
  dependency: 'afterok:25110008',
  array: '1-3',
  comment: 'schedflow:nightly',
  standard_output: '/tmp/nightly-%j.out',
  standard_error: '/tmp/nightly-%j.err',
  qos: 'normal',
  nice: 10,
};

describe.each(SUPPORTED_VERSIONS)('encodeSubmit %s', (version) => {
  const codec = codecFor(version);

  it('builds a body valid against job_submit_req from every known field and pass-through members', () => {
    const body = codec.encodeSubmit(jobSpecSchema.parse(FULL_SPEC));
    expect(validateAgainstSpec(version, 'job_submit_req', body).errors).toEqual([]);
    expect(body.job).toMatchObject({
      name: 'nightly',
      script: '#!/bin/bash\necho hi\n',
      environment: ['PATH=/usr/local/bin:/usr/bin:/bin', 'HOME=/home/alice', 'THREADS=4', 'DEBUG=true'],
      time_limit: { set: true, infinite: false, number: 90 },
      memory_per_node: { set: true, infinite: false, number: 4096 },
      tasks: 2,
      cpus_per_task: 2,
      comment: 'schedflow:nightly',
      qos: 'normal',
      nice: 10,
    });
  });

  it('gives a spec without environment the default one, and spells no limit as infinite', () => {
    const body = codec.encodeSubmit(
      jobSpecSchema.parse({ name: 'bare', script: '#!/bin/sh\ntrue\n', time_limit: 'UNLIMITED' }),
    );
    expect(validateAgainstSpec(version, 'job_submit_req', body).errors).toEqual([]);
    expect(body.job.environment).toEqual(DEFAULT_ENVIRONMENT);
    expect(body.job.time_limit).toEqual({ set: false, infinite: true, number: 0 });
    expect(body.job).not.toHaveProperty('memory_per_node');
    const empty = codec.encodeSubmit(jobSpecSchema.parse({ name: 'e', script: '#!/bin/sh\n', environment: {} }));
    expect(empty.job.environment).toEqual(DEFAULT_ENVIRONMENT);
  });

  it('refuses a member the version does not have, naming it', () => {
    // The door refuses such a spec; a stored one reaches the codec as it is, and is refused here too.
    const spec = { ...jobSpecSchema.parse(FULL_SPEC), colour: 'blue' };
    expect(() => codec.encodeSubmit(spec)).toThrow(new RegExp(`"colour".*${version.replaceAll('.', '\\.')}`));
  });
});

describe('encodeSubmit across versions', () => {
  it('accepts step_id only where job_desc_msg has it (v0.0.44)', () => {
    const stepId = { job_id: { set: true, infinite: false, number: 1 } };
    const spec = jobSpecSchema.parse({ ...FULL_SPEC, step_id: stepId });
    expect(() => codecFor('v0.0.42').encodeSubmit(spec)).toThrow(/"step_id".*v0\.0\.42/);
    expect(() => codecFor('v0.0.43').encodeSubmit(spec)).toThrow(/"step_id".*v0\.0\.43/);
    expect(codecFor('v0.0.44').encodeSubmit(spec).job.step_id).toEqual(stepId);
  });

  it('would be caught by the validator if a limit were a bare number', () => {
    const body = codecFor('v0.0.44').encodeSubmit(jobSpecSchema.parse(FULL_SPEC));
    const broken = { job: { ...body.job, time_limit: 90 } };
    expect(validateAgainstSpec('v0.0.44', 'job_submit_req', broken).ok).toBe(false);
  });
});
