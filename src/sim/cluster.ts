import { createHash } from 'node:crypto';
import { chmodSync, lstatSync, mkdirSync } from 'node:fs';
import { constants, tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import type { Logger } from '../logger.js';
import { ArraySyntaxError, DEFAULT_MAX_ARRAY_SIZE, type JobArray, parseJobArray } from '../sched/job-array.js';
import {
  type Dependency,
  DependencySyntaxError,
  type DependencyTarget,
  evaluateDependency,
  parseDependency,
} from './dependency.js';
import { killOrphan, type RunningProcess, simulatedProcess, startJobProcess } from './job-process.js';
import { JobStore } from './job-store.js';
import { type JobUser, SubmitterUsers } from './job-user.js';
import type { PartitionSettings } from './sim-config.js';
import { cpusOf, isArrayMeta, isTerminal, type SimJob } from './sim-job.js';
import { SlurmError } from './slurm-errno.js';
import { StartForecast } from './start-forecast.js';

export interface ClusterOptions {
  clusterName: string;
  nodeName: string;
  cpus: number;
  memoryMb: number;
  partitions: PartitionSettings[];
  /** Time limits elapse this many times faster than the wall clock (tests use 60+). */
  timeScale: number;
  /** Seconds a finished job stays in the controller listing (slurm.conf MinJobAge). */
  minJobAgeSec: number;
  /** Seconds between SIGTERM and SIGKILL on cancel and time-out (slurm.conf KillWait). */
  killWaitSec: number;
  stateDir: string;
  /**
   * Where a job that names no `current_working_directory` runs and writes its `slurm-%j.out`.
   * @defaultValue a folder of this simulator's own in the temporary folder (see defaultWorkDir)
   */
  workDir?: string | undefined;
  firstJobId: number;
  /** slurm.conf MaxArraySize. @defaultValue 1001 */
  maxArraySize?: number | undefined;
  /** Benchmark mode: scripts are not executed; every job runs this long and completes. */
  simulatedRuntimeSec?: number | undefined;
  /**
   * Seconds between jobacct_gather samples (slurm.conf JobAcctGatherFrequency): a job that ends
   * sooner has no usage in accounting (empty `tres.requested`), as on a real cluster.
   */
  jobAcctGatherFrequencySec?: number | undefined;
  /**
   * The host user scripts run as (the simulator is root; see resolveJobUser).
   * @defaultValue null: the simulator's own user
   */
  jobUser?: JobUser | null | undefined;
  logger: Logger;
}

/** A submission after the HTTP layer has decoded the job description. */
export interface SubmitRequest {
  name?: string | undefined;
  account?: string | undefined;
  partition?: string | undefined;
  comment?: string | undefined;
  script?: string | undefined;
  environment?: string[] | undefined;
  cwd?: string | undefined;
  tasks?: number | undefined;
  cpusPerTask?: number | undefined;
  memoryPerNodeMb?: number | undefined;
  /** Minutes; undefined for the partition default, null for infinite. */
  timeLimitMin?: number | null | undefined;
  dependency?: string | undefined;
  standardOutput?: string | undefined;
  standardError?: string | undefined;
  array?: string | undefined;
  /** `hold: true` in the job_desc_msg: submitted held by its user (priority 0, JobHeldUser). */
  hold?: boolean | undefined;
}

export interface Submitter {
  user: string;
  userId: number;
  /** Account used when the request names none. */
  defaultAccount?: string | undefined;
  /** Accounts the user has an association with; undefined: any. */
  accounts?: readonly string[] | undefined;
  /** The association's MaxSubmitJobs: pending and running jobs allowed at once; undefined: no limit. */
  maxSubmitJobs?: number | undefined;
}

/** What `POST /job/{id}` may change, decoded from its `job_desc_msg`. */
export interface JobChange {
  timeLimitMin?: number | undefined;
  partition?: string | undefined;
  qos?: string | undefined;
  nice?: number | undefined;
  name?: string | undefined;
  comment?: string | undefined;
  hold?: boolean | undefined;
}

export type CancelResult = { ok: true } | { ok: false; error: SlurmError };

const nowSec = (): number => Math.floor(Date.now() / 1000);

/** Slurm's SIG_OOM: the signal its records give a job the kernel killed for its memory cgroup. */
export const SIG_OOM = 125;

/**
 * The simulated slurmctld + slurmdbd: one node, a CPU count, partitions,
 * FIFO scheduling with backfill of smaller jobs, dependencies, time limits,
 * and scripts that really run.
 */
export class Cluster {
  private readonly jobs = new Map<number, SimJob>();
  private readonly processes = new Map<number, RunningProcess>();
  private readonly timers = new Set<NodeJS.Timeout>();
  /** Jobs whose end the simulator caused, so an exit is classified correctly. */
  private readonly endCause = new Map<number, 'cancel' | 'timeout' | 'oom'>();
  /** The latest arming of each running job's time limit (armTimeLimit). */
  private readonly limitTimers = new Map<number, symbol>();
  /**
   * When each running job was launched, in ms: its record's start is whole seconds, which at a
   * time scale of 60 is up to a simulated minute early, enough to end a one-minute job at once.
   */
  private readonly launchedAtMs = new Map<number, number>();
  private readonly store: JobStore;
  /** Whom each submitter's scripts run as (a simulator started as root). */
  private readonly submitterUsers: SubmitterUsers;
  private nextJobId: number;
  private lastJobUpdateSec = nowSec();
  private scheduling = false;
  private schedulePending: NodeJS.Immediate | undefined;
  private closed = false;

  constructor(readonly options: ClusterOptions) {
    this.store = new JobStore(options.stateDir);
    this.submitterUsers = new SubmitterUsers(options.jobUser ?? null);
    this.nextJobId = options.firstJobId;
  }

  get scriptDir(): string {
    // The state dir may be schedflow's data dir, which the job's user must not enter: its
    // scripts go beside its default working folder, in a folder it may pass through but not list.
    if (this.options.jobUser) return `${defaultWorkDir(this.options.stateDir)}-scripts`;
    return join(this.options.stateDir, 'scripts');
  }

  /** Where jobs without a working directory run. */
  get workDir(): string {
    return this.options.workDir ?? defaultWorkDir(this.options.stateDir);
  }

  /** Loads the saved job table; jobs that were running when the simulator died become NODE_FAIL. */
  async start(): Promise<void> {
    await this.store.init();
    ensureWorkDir(this.workDir, this.options.jobUser ?? null);
    if (this.options.jobUser) ensureScriptDir(this.scriptDir);
    const saved = this.store.load();
    if (saved) {
      this.nextJobId = Math.max(saved.nextJobId, this.options.firstJobId);
      const now = nowSec();
      for (const job of saved.jobs) {
        if (job.state === 'RUNNING') {
          if (job.pid !== undefined) killOrphan(job.pid, job.pidStartTicks, this.scriptDir, job.jobId);
          job.state = 'NODE_FAIL';
          job.reason = 'NodeDown';
          job.endTime = now;
          job.lastUpdate = now;
        } else if (job.completing) {
          // Cancelled, its script still dying when the simulator stopped: it stays CANCELLED.
          if (job.pid !== undefined) killOrphan(job.pid, job.pidStartTicks, this.scriptDir, job.jobId);
          job.lastUpdate = now;
        }
        delete job.completing;
        delete job.pid;
        delete job.pidStartTicks;
        this.jobs.set(job.jobId, job);
      }
      this.options.logger.info({ jobs: saved.jobs.length, nextJobId: this.nextJobId }, 'simulator job table restored');
    }
    this.touch();
    this.schedule();
  }

  /** Stops scheduling and kills running scripts; their jobs are NODE_FAIL on the next start. */
  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    if (this.schedulePending) clearImmediate(this.schedulePending);
    for (const timer of this.timers) clearTimeout(timer);
    this.timers.clear();
    this.store.saveNow(this.snapshot());
    const running = [...this.processes.values()];
    for (const proc of running) proc.signal('SIGKILL');
    await Promise.all(running.map((proc) => proc.done));
    this.store.release();
  }

  /**
   * slurmctld killed with SIGKILL and started again from its last state save, which lacks its
   * `count` newest jobs: they are gone (their scripts killed, as slurmd's are for jobs the
   * restarted controller does not know), and their ids go to the next jobs submitted, as the
   * saved next job id is the lowest of them. slurmdbd had not been told of them yet either (the
   * controller's queued messages die with it), so accounting has no record of them. Returns the
   * ids lost.
   */
  crashLosingNewest(count: number): number[] {
    const lost = this.listJobs().slice(-Math.max(0, count));
    for (const job of lost) {
      this.jobs.delete(job.jobId);
      this.endCause.delete(job.jobId);
      this.processes.get(job.jobId)?.signal('SIGKILL');
      this.processes.delete(job.jobId);
    }
    const first = lost[0];
    if (first) this.nextJobId = first.jobId;
    this.options.logger.warn(
      { lost: lost.map((j) => j.jobId), nextJobId: this.nextJobId },
      'simulated slurmctld crash',
    );
    this.touch();
    this.store.saveNow(this.snapshot());
    this.schedule();
    return lost.map((job) => job.jobId);
  }

  get lastJobUpdate(): number {
    return this.lastJobUpdateSec;
  }

  listJobs(): SimJob[] {
    return [...this.jobs.values()].sort((a, b) => a.jobId - b.jobId);
  }

  getJob(jobId: number): SimJob | undefined {
    return this.jobs.get(jobId);
  }

  /** Jobs slurmctld still holds in memory: active ones and those finished less than MinJobAge ago. */
  isInController(job: SimJob, now = nowSec()): boolean {
    return !isTerminal(job) || now - job.endTime < this.options.minJobAgeSec;
  }

  cpusInUse(): number {
    let used = 0;
    for (const job of this.jobs.values()) {
      if (this.processes.has(job.jobId) || job.state === 'RUNNING') used += cpusOf(job);
    }
    return used;
  }

  /** MB the running jobs hold: each its memory per node, or DefMemPerCPU (256 MB, the captured cluster's) a CPU. */
  memoryInUse(): number {
    let used = 0;
    for (const job of this.jobs.values()) {
      if (this.processes.has(job.jobId) || job.state === 'RUNNING') used += job.memoryPerNodeMb ?? 256 * cpusOf(job);
    }
    return used;
  }

  partition(name: string): PartitionSettings | undefined {
    return this.options.partitions.find((p) => p.name === name);
  }

  defaultPartition(): PartitionSettings {
    const found = this.options.partitions.find((p) => p.default) ?? this.options.partitions[0];
    if (!found) throw new Error('the simulator has no partitions configured');
    return found;
  }

  /**
   * slurmctld's checks of a batch job, in its order: partition, account, limits, resources,
   * time, dependency, and last the script and environment it writes to the spool. It does not
   * read the script: one without `#!` is accepted and fails when slurmd cannot exec it.
   */
  submit(request: SubmitRequest, submitter: Submitter): SimJob {
    // The name slurmrestd reports refusals under, whatever slurmctld found.
    const source = 'slurm_submit_batch_job()';
    const fail = (name: ConstructorParameters<typeof SlurmError>[0]) =>
      new SlurmError(name, 'Batch job submission failed', source);

    let array: JobArray | undefined;
    if (request.array !== undefined) {
      try {
        array = parseJobArray(request.array, this.options.maxArraySize ?? DEFAULT_MAX_ARRAY_SIZE);
      } catch (error) {
        if (!(error instanceof ArraySyntaxError)) throw error;
        throw fail('ESLURM_INVALID_ARRAY');
      }
    }
    const script = request.script ?? '';
    if (script === '') throw fail('ESLURM_JOB_SCRIPT_MISSING');
    const partition = request.partition ? this.partition(request.partition) : this.defaultPartition();
    if (!partition) throw fail('ESLURM_INVALID_PARTITION_NAME');
    const account = request.account || submitter.defaultAccount;
    if (!account) throw fail('ESLURM_INVALID_ACCOUNT');
    if (submitter.accounts && !submitter.accounts.includes(account)) throw fail('ESLURM_INVALID_ACCOUNT');
    if (partition.allowAccounts && !partition.allowAccounts.includes(account)) {
      throw fail('ESLURM_INVALID_ACCOUNT');
    }
    if (submitter.maxSubmitJobs !== undefined && this.activeJobsOf(submitter.user) >= submitter.maxSubmitJobs) {
      throw fail('ESLURM_ACCOUNTING_POLICY');
    }
    const tasks = request.tasks ?? 1;
    const cpusPerTask = request.cpusPerTask ?? 1;
    if (tasks < 1 || cpusPerTask < 1 || tasks * cpusPerTask > this.options.cpus) {
      throw fail('ESLURM_TOO_MANY_REQUESTED_CPUS');
    }
    const timeLimitMin =
      request.timeLimitMin === undefined
        ? (partition.defaultTimeMin ?? partition.maxTimeMin ?? null)
        : request.timeLimitMin;
    if (
      partition.maxTimeMin !== undefined &&
      partition.maxTimeMin !== null &&
      (timeLimitMin === null || timeLimitMin > partition.maxTimeMin)
    ) {
      throw fail('ESLURM_INVALID_TIME_LIMIT');
    }
    if (timeLimitMin !== null && timeLimitMin < 0) throw fail('ESLURM_INVALID_TIME_LIMIT');
    const dependency = this.checkDependency(request.dependency ?? '', source);
    // slurmctld writes the environment beside the script and refuses a job without one.
    if (!request.environment?.length) throw fail('ESLURM_WRITING_TO_FILE');
    // Only then does it look for nodes: a job no node can hold is refused after its record
    // was made, and that record stays, FAILED (see below).
    const unplaceable = request.memoryPerNodeMb !== undefined && request.memoryPerNodeMb > this.options.memoryMb;

    const now = nowSec();
    const job: SimJob = {
      jobId: this.nextJobId++,
      name: request.name ?? '',
      user: submitter.user,
      // Slurm's user_id is the uid the job runs as and owns its files: here the host user it
      // really runs as, when that is not the simulator's own.
      userId: this.submitterUsers.runAs(submitter.user)?.uid ?? submitter.userId,
      account,
      partition: partition.name,
      comment: request.comment ?? '',
      script,
      environment: request.environment ?? [],
      cwd: request.cwd ?? this.workDir,
      tasks,
      cpusPerTask,
      memoryPerNodeMb: request.memoryPerNodeMb ?? null,
      timeLimitMin,
      dependency: request.dependency ?? '',
      standardOutput: request.standardOutput ?? '',
      standardError: request.standardError ?? '',
      state: 'PENDING',
      reason: request.hold ? 'JobHeldUser' : dependency ? 'Dependency' : 'None',
      ...(request.hold && { held: true }),
      submitTime: now,
      // A job held by a dependency becomes eligible only when it is released.
      eligibleTime: dependency ? 0 : now,
      startTime: 0,
      endTime: 0,
      exitCode: null,
      termSignal: null,
      cpuUserSec: 0,
      cpuSystemSec: 0,
      peakMemoryBytes: null,
      nodes: '',
      lastUpdate: now,
    };
    if (array) {
      Object.assign(job, { arrayJobId: job.jobId, arrayPending: array.indexes, arrayThrottle: array.throttle ?? 0 });
    }
    if (unplaceable) {
      // As 25.11.7 leaves it: FAILED (BadConstraints) in the controller, with a raw status of 1
      // that reads as signal 1 there and as exit code 1 in accounting; the submit answer has no id.
      Object.assign(job, { state: 'FAILED', reason: 'BadConstraints', startTime: now, endTime: now, termSignal: 1 });
      job.unplaceable = true;
      this.jobs.set(job.jobId, job);
      this.changed(job);
      throw fail('ESLURM_REQUESTED_NODE_CONFIG_UNAVAILABLE');
    }
    this.jobs.set(job.jobId, job);
    this.options.logger.info({ job_id: job.jobId, account, partition: partition.name }, 'job submitted');
    this.changed(job);
    this.schedule();
    return job;
  }

  private checkDependency(text: string, source: string): Dependency | undefined {
    const refused = () => new SlurmError('ESLURM_DEPENDENCY', 'Batch job submission failed', source);
    let dependency: Dependency | undefined;
    try {
      dependency = parseDependency(text);
    } catch (error) {
      if (error instanceof DependencySyntaxError) throw refused();
      throw error;
    }
    for (const term of dependency?.terms ?? []) {
      if (!this.jobs.has(term.jobId)) throw refused();
    }
    return dependency;
  }

  /** The user's pending and running jobs: what MaxSubmitJobs counts. */
  activeJobsOf(user: string): number {
    let count = 0;
    for (const job of this.jobs.values()) if (job.user === user && !isTerminal(job)) count++;
    return count;
  }

  /**
   * scancel: `user` (when given) must own the job, as slurmctld checks for anyone but an
   * operator. A job the controller no longer holds (past MinJobAge) is unknown to it.
   */
  cancel(jobId: number, user?: string): CancelResult {
    const job = this.jobs.get(jobId);
    // The array's id names every task of it, as scancel's does.
    if (job && job.arrayJobId === jobId && (!user || job.user === user)) {
      const active = this.arrayRecords(jobId).filter((record) => !isTerminal(record) && record !== job);
      for (const record of active) this.cancelOne(record.jobId, user);
      if (isTerminal(job)) return { ok: true };
    }
    return this.cancelOne(jobId, user);
  }

  /** Every record of the array `arrayJobId`: its own record first, then its tasks'. */
  arrayRecords(arrayJobId: number): SimJob[] {
    return this.listJobs().filter((job) => job.arrayJobId === arrayJobId);
  }

  private cancelOne(jobId: number, user?: string): CancelResult {
    const source = 'slurm_kill_job()';
    const job = this.jobs.get(jobId);
    if (!job || !this.isInController(job)) {
      return { ok: false, error: new SlurmError('ESLURM_INVALID_JOB_ID', 'Job not found', source) };
    }
    if (user !== undefined && job.user !== user) {
      return { ok: false, error: new SlurmError('ESLURM_ACCESS_DENIED', 'Job of another user', source) };
    }
    if (isTerminal(job)) {
      return { ok: false, error: new SlurmError('ESLURM_ALREADY_DONE', 'Job already finished', source) };
    }
    const now = nowSec();
    if (job.state === 'PENDING') {
      // Its pending tasks end with it (they stay in its record, as slurmctld keeps them).
      job.state = 'CANCELLED';
      job.reason = 'None';
      job.endTime = now;
      this.changed(job);
      this.schedule();
      return { ok: true };
    }
    this.endCause.set(jobId, 'cancel');
    job.state = 'CANCELLED';
    job.endTime = now;
    job.completing = true;
    this.changed(job);
    this.terminate(jobId);
    return { ok: true };
  }

  /**
   * `scontrol update job` (`POST /job/{id}`), with slurmctld's checks as 25.11.7 makes them for
   * `actor`: only the job's user or an operator (2010 to anyone else); a partition only while pending (2073), one
   * that exists (2000) and the account may use (2045), whose MaxTime the job's limit fits
   * (2051); a user may not raise a running job's limit, nor a pending one's past the
   * partition's MaxTime, nor set a negative nice (2002); a QOS the cluster has (2066). Checked
   * in full before anything changes. `hold` holds (priority 0, JobHeldUser) or releases.
   */
  update(jobId: number, change: JobChange, actor: { user: string; operator: boolean }): SimJob {
    const fail = (name: ConstructorParameters<typeof SlurmError>[0]) =>
      new SlurmError(name, 'Job update requested failed', 'slurm_update_job2()');
    const job = this.jobs.get(jobId);
    if (!job || !this.isInController(job)) throw fail('ESLURM_INVALID_JOB_ID');
    // Another user's job: slurmctld says 2010 (Invalid user id), not 2002 (real 25.11.7).
    if (!actor.operator && job.user !== actor.user) throw fail('ESLURM_USER_ID_MISSING');
    if (isTerminal(job)) throw fail('ESLURM_ALREADY_DONE');
    const pending = job.state === 'PENDING';
    let partition = this.partition(job.partition);
    if (change.partition !== undefined && change.partition !== job.partition) {
      if (!pending) throw fail('ESLURM_JOB_NOT_PENDING');
      partition = this.partition(change.partition);
      if (!partition) throw fail('ESLURM_INVALID_PARTITION_NAME');
      if (partition.allowAccounts && !partition.allowAccounts.includes(job.account))
        throw fail('ESLURM_INVALID_ACCOUNT');
    }
    const maxTime = partition?.maxTimeMin ?? null;
    if (change.timeLimitMin !== undefined && change.timeLimitMin !== job.timeLimitMin) {
      const raising = job.timeLimitMin !== null && change.timeLimitMin > job.timeLimitMin;
      if (!actor.operator && ((!pending && raising) || (maxTime !== null && change.timeLimitMin > maxTime))) {
        throw fail('ESLURM_ACCESS_DENIED');
      }
    } else if (change.partition !== undefined && maxTime !== null && (job.timeLimitMin ?? Infinity) > maxTime) {
      // Moved with its limit as it is, the job would exceed the new partition's MaxTime.
      throw fail('ESLURM_INVALID_TIME_LIMIT');
    }
    if (change.nice !== undefined && change.nice < 0 && !actor.operator) throw fail('ESLURM_ACCESS_DENIED');
    if (change.qos !== undefined && change.qos !== 'normal') throw fail('ESLURM_INVALID_QOS');

    if (change.partition !== undefined) job.partition = change.partition;
    if (change.timeLimitMin !== undefined) job.timeLimitMin = change.timeLimitMin;
    if (change.name !== undefined) job.name = change.name;
    if (change.comment !== undefined) job.comment = change.comment;
    if (change.nice !== undefined) job.nice = change.nice;
    if (change.qos !== undefined) job.qos = change.qos;
    if (change.hold === true) {
      job.held = true;
      job.reason = 'JobHeldUser';
    } else if (change.hold === false && job.held) {
      delete job.held;
      // A dependency not yet met holds it still (schedule() resolves it if it is).
      job.reason = pending && job.dependency !== '' && job.eligibleTime === 0 ? 'Dependency' : 'None';
    }
    job.lastUpdate = nowSec();
    this.changed(job);
    const proc = this.processes.get(jobId);
    if (proc && change.timeLimitMin !== undefined) this.armTimeLimit(job, proc);
    this.options.logger.info({ job_id: jobId, change }, 'job updated');
    this.schedule();
    return job;
  }

  /** Sends a signal to a running job's processes without cancelling it (scancel --signal). */
  signal(jobId: number, sig: NodeJS.Signals, user?: string): CancelResult {
    const job = this.jobs.get(jobId);
    if (!job || !this.isInController(job)) {
      return { ok: false, error: new SlurmError('ESLURM_INVALID_JOB_ID', 'Job not found', 'slurm_kill_job()') };
    }
    if (user !== undefined && job.user !== user) {
      return { ok: false, error: new SlurmError('ESLURM_ACCESS_DENIED', 'Job of another user', 'slurm_kill_job()') };
    }
    const proc = this.processes.get(jobId);
    if (job.state !== 'RUNNING' || !proc) {
      return { ok: false, error: new SlurmError('ESLURM_ALREADY_DONE', 'Job is not running', 'slurm_kill_job()') };
    }
    proc.signal(sig);
    return { ok: true };
  }

  /**
   * Ends the running job when its limit, counted from its start, elapses; armed again when an
   * update changes the limit, and only the last arming counts.
   */
  private armTimeLimit(job: SimJob, proc: RunningProcess): void {
    const token = Symbol('time limit');
    this.limitTimers.set(job.jobId, token);
    if (job.timeLimitMin === null) return;
    const launchedAt = this.launchedAtMs.get(job.jobId) ?? job.startTime * 1000;
    const elapsedMs = (Date.now() - launchedAt) * this.options.timeScale;
    const limitMs = Math.max(0, (job.timeLimitMin * 60_000 - elapsedMs) / this.options.timeScale);
    this.later(limitMs, () => {
      if (this.limitTimers.get(job.jobId) !== token) return;
      if (this.processes.get(job.jobId) !== proc || this.endCause.has(job.jobId)) return;
      this.endCause.set(job.jobId, 'timeout');
      this.terminate(job.jobId);
    });
  }

  /** SIGTERM the job's process group, then SIGKILL after KillWait, as slurmd does. */
  private terminate(jobId: number): void {
    const proc = this.processes.get(jobId);
    if (!proc) return;
    proc.signal('SIGTERM');
    this.later(this.options.killWaitSec * 1000, () => {
      if (this.processes.get(jobId) === proc) proc.signal('SIGKILL');
    });
  }

  private later(ms: number, fn: () => void): void {
    // A job whose process came up while the simulator closed (close() kills it) must not
    // leave its time limit pending after close() cleared the others.
    if (this.closed) return;
    const timer = setTimeout(() => {
      this.timers.delete(timer);
      fn();
    }, ms);
    this.timers.add(timer);
  }

  private dependencyTarget = (jobId: number): DependencyTarget | undefined => {
    const job = this.jobs.get(jobId);
    if (!job) return undefined;
    // A dependency on an array's id is on every task of it, as slurmctld reads one.
    if (job.arrayJobId === jobId) {
      const records = this.arrayRecords(jobId);
      return {
        started: records.some((record) => record.startTime > 0),
        finished: records.every((record) => isTerminal(record) && !this.processes.has(record.jobId)),
        completedOk: records.every((record) => record.state === 'COMPLETED'),
      };
    }
    return {
      started: job.startTime > 0,
      finished: isTerminal(job) && !this.processes.has(jobId),
      completedOk: job.state === 'COMPLETED',
    };
  };

  /** Releases jobs held by dependencies that are met, then starts what fits, in job id order. */
  schedule(): void {
    if (this.closed || this.scheduling) return;
    this.scheduling = true;
    try {
      this.resolveDependencies();
      let free = this.options.cpus - this.cpusInUse();
      // As slurmctld: the first job that does not fit waits for `Resources`, the ones behind it
      // that do not fit either for `Priority` (a job ahead of them is waiting).
      let blockedAhead = false;
      for (const job of this.listJobs()) {
        // Held by a dependency, met later or never, or by its user: not the scheduler's to start.
        if (
          job.state !== 'PENDING' ||
          job.held ||
          job.reason === 'Dependency' ||
          job.reason === 'DependencyNeverSatisfied'
        ) {
          continue;
        }
        // A DOWN partition starts nothing: its jobs wait, as slurmctld's do, with its reason.
        if (this.partition(job.partition)?.state === 'DOWN') {
          if (job.reason !== 'PartitionDown') {
            job.reason = 'PartitionDown';
            this.changed(job);
          }
          continue;
        }
        const need = cpusOf(job);
        if (isArrayMeta(job)) {
          free = this.startArrayTasks(job, free);
        } else if (need <= free) {
          free -= need;
          this.launch(job);
        } else {
          const reason = blockedAhead ? 'Priority' : 'Resources';
          blockedAhead = true;
          if (job.reason !== reason) {
            job.reason = reason;
            this.changed(job);
          }
        }
      }
      this.forecastStarts();
    } finally {
      this.scheduling = false;
    }
  }

  /**
   * Starts what fits of an array's pending tasks, lowest index first, at most its throttle
   * running at once: each leaves the array's record as a record of its own under a new job id,
   * and the last takes the array's record itself. Returns the CPUs left free.
   */
  private startArrayTasks(meta: SimJob, free: number): number {
    const need = cpusOf(meta);
    const throttle = meta.arrayThrottle ?? 0;
    let running = throttle > 0 ? this.arrayRecords(meta.jobId).filter((job) => job.state === 'RUNNING').length : 0;
    let left = free;
    while ((meta.arrayPending?.length ?? 0) > 0) {
      const throttled = throttle > 0 && running >= throttle;
      if (throttled || need > left) {
        const reason = throttled ? 'JobArrayTaskLimit' : 'Resources';
        if (meta.reason !== reason) {
          meta.reason = reason;
          this.changed(meta);
        }
        return left;
      }
      const [taskId, ...rest] = meta.arrayPending as number[];
      left -= need;
      running++;
      if (rest.length === 0) {
        meta.arrayTaskId = taskId as number;
        delete meta.arrayPending;
        delete meta.arrayThrottle;
        this.launch(meta);
        return left;
      }
      meta.arrayPending = rest;
      const task: SimJob = {
        ...meta,
        jobId: this.nextJobId++,
        arrayTaskId: taskId as number,
        arrayPending: undefined,
        arrayThrottle: undefined,
        environment: [...meta.environment],
      };
      delete task.arrayPending;
      delete task.arrayThrottle;
      this.jobs.set(task.jobId, task);
      this.launch(task);
      this.changed(meta);
    }
    return left;
  }

  /**
   * The forecast start of every job still waiting for CPUs (`Resources`, `Priority`, an array's
   * tasks), in the scheduler's order, as slurmctld sends it in `start_time` (start-forecast.ts).
   * Jobs held or behind a dependency get none.
   */
  private forecastStarts(): void {
    const now = nowSec();
    const running = [...this.jobs.values()]
      .filter((job) => this.processes.has(job.jobId) || job.state === 'RUNNING')
      .map((job) => ({
        cpus: cpusOf(job),
        // As the job's end_time shows it: start + time limit; a job ending (completing) ends now.
        endSec:
          job.state !== 'RUNNING' ? now : job.timeLimitMin === null ? null : job.startTime + job.timeLimitMin * 60,
      }));
    const forecast = new StartForecast(now, this.options.cpus - this.cpusInUse(), running);
    for (const job of this.listJobs()) {
      if (job.state !== 'PENDING') continue;
      const waitsForCpus =
        !job.held && (job.reason === 'Resources' || job.reason === 'Priority' || job.reason === 'JobArrayTaskLimit');
      const expected = waitsForCpus
        ? forecast.place(cpusOf(job), job.timeLimitMin === null ? null : job.timeLimitMin * 60)
        : 0;
      if ((job.expectedStart ?? 0) !== expected) {
        job.expectedStart = expected;
        this.changed(job);
      }
    }
  }

  private resolveDependencies(): void {
    for (let changed = true; changed; ) {
      changed = false;
      for (const job of this.jobs.values()) {
        if (job.state !== 'PENDING' || job.dependency === '') continue;
        const dependency = parseDependency(job.dependency);
        if (!dependency) continue;
        const status = evaluateDependency(dependency, this.dependencyTarget);
        const now = nowSec();
        if (status === 'never') {
          // As real Slurm without kill_invalid_depend (its default): the job stays PENDING
          // forever, with this reason, until someone cancels it.
          if (job.reason !== 'DependencyNeverSatisfied') {
            job.reason = 'DependencyNeverSatisfied';
            this.changed(job);
          }
        } else if (status === 'satisfied' && job.reason === 'Dependency') {
          job.reason = 'None';
          job.eligibleTime = now;
          this.changed(job);
        }
      }
    }
  }

  private launch(job: SimJob): void {
    const now = nowSec();
    job.state = 'RUNNING';
    job.reason = 'None';
    job.startTime = now;
    this.launchedAtMs.set(job.jobId, Date.now());
    job.expectedStart = 0;
    job.nodes = this.options.nodeName;
    this.changed(job);
    const simulated = this.options.simulatedRuntimeSec;
    const starting =
      simulated === undefined
        ? startJobProcess(job, {
            scriptDir: this.scriptDir,
            nodeName: this.options.nodeName,
            clusterName: this.options.clusterName,
            jobUser: this.submitterUsers.runAs(job.user),
          })
        : Promise.resolve(simulatedProcess(simulated * 1000));
    // Stands in for the process until it has started, so its CPUs count as taken
    // and a cancel or shutdown that arrives meanwhile still reaches it.
    const startingProc: RunningProcess = {
      pid: -1,
      done: starting.then(
        (proc) => proc.done,
        () => ({ exitCode: 1, signal: null }),
      ),
      signal: (sig) => {
        starting.then(
          (proc) => proc.signal(sig),
          () => {},
        );
      },
      peakMemoryBytes: () => null,
      cpuSeconds: () => null,
      startTicks: null,
    };
    this.processes.set(job.jobId, startingProc);
    starting.then(
      (proc) => this.track(job, proc),
      (error: unknown) => {
        this.options.logger.warn({ job_id: job.jobId, err: error }, 'job could not be started');
        this.processes.delete(job.jobId);
        if (!this.closed) this.finish(job, { exitCode: 1, signal: null });
      },
    );
  }

  private track(job: SimJob, proc: RunningProcess): void {
    if (this.jobs.get(job.jobId) !== job) {
      // Started as a simulated crash took its job away.
      proc.signal('SIGKILL');
      return;
    }
    this.processes.set(job.jobId, proc);
    job.pid = proc.pid;
    if (proc.startTicks !== null) job.pidStartTicks = proc.startTicks;
    this.changed(job);
    this.armTimeLimit(job, proc);
    if (job.memoryPerNodeMb !== null) this.enforceMemory(job, proc, job.memoryPerNodeMb);
    void proc.done.then((exit) => {
      // A job a simulated crash took away: its id may be another job's by now.
      if (this.jobs.get(job.jobId) !== job) return;
      this.processes.delete(job.jobId);
      delete job.pid;
      delete job.pidStartTicks;
      // slurmdbd learns a step's MaxRSS when the step ends, so it is recorded with the end; a step
      // that ended before jobacct_gather's first sample has none.
      const ranSec = Date.now() / 1000 - job.startTime;
      const sampled = ranSec >= (this.options.jobAcctGatherFrequencySec ?? 0);
      job.peakMemoryBytes = sampled ? proc.peakMemoryBytes() : null;
      // The script's CPU time (user, system), as accounting's time.user/system/total give it.
      const cpu = proc.cpuSeconds();
      if (cpu !== null) {
        job.cpuUserSec = cpu.user;
        job.cpuSystemSec = cpu.system;
      }
      if (!this.closed) this.finish(job, exit);
    });
  }

  /**
   * The cgroup's memory limit, as task/cgroup enforces it: a job whose processes hold more than
   * its memory_per_node is killed by the kernel's OOM killer, SIGKILL without KillWait, and ends
   * OUT_OF_MEMORY. Checked at each memory sample (every second), so a brief peak between two
   * samples goes unseen, as jobacct_gather would miss it too.
   */
  private enforceMemory(job: SimJob, proc: RunningProcess, limitMb: number): void {
    const timer = setInterval(() => {
      if (this.processes.get(job.jobId) !== proc || this.endCause.has(job.jobId)) {
        clearInterval(timer);
        return;
      }
      if ((proc.peakMemoryBytes() ?? 0) <= limitMb * 1024 * 1024) return;
      clearInterval(timer);
      this.endCause.set(job.jobId, 'oom');
      proc.signal('SIGKILL');
    }, 250);
    timer.unref();
    void proc.done.finally(() => clearInterval(timer));
  }

  private finish(job: SimJob, exit: { exitCode: number | null; signal: NodeJS.Signals | null }): void {
    const cause = this.endCause.get(job.jobId);
    this.endCause.delete(job.jobId);
    this.limitTimers.delete(job.jobId);
    this.launchedAtMs.delete(job.jobId);
    const now = nowSec();
    delete job.completing;
    job.exitCode = exit.signal ? null : exit.exitCode;
    job.termSignal = exit.signal ? signalNumber(exit.signal) : null;
    if (cause === 'cancel') {
      // State and end time were set when the cancel was accepted.
    } else if (cause === 'timeout') {
      job.state = 'TIMEOUT';
      job.reason = 'TimeLimit';
      job.endTime = now;
    } else if (cause === 'oom') {
      // Real slurmctld reports the kill as signal 125 (Slurm's SIG_OOM; sacct's ExitCode 0:125),
      // SIGNALED with no return code, in the job's and its batch step's records alike
      // (test/fixtures/real-slurm-25.11/oom_*), not the SIGKILL the kernel sent.
      job.state = 'OUT_OF_MEMORY';
      job.reason = 'OutOfMemory';
      job.exitCode = null;
      job.termSignal = SIG_OOM;
      job.endTime = now;
    } else if (exit.exitCode === 0 && !exit.signal) {
      job.state = 'COMPLETED';
      job.reason = 'None';
      job.endTime = now;
    } else {
      job.state = 'FAILED';
      job.reason = 'NonZeroExitCode';
      job.endTime = now;
    }
    this.options.logger.info(
      { job_id: job.jobId, state: job.state, exit_code: job.exitCode, signal: job.termSignal },
      'job finished',
    );
    this.changed(job);
    this.scheduleSoon();
  }

  /**
   * One scheduling pass for every job that ended in this turn of the event loop: a pass sorts the
   * whole table, and thousands of jobs ending in the same second (a benchmark's mass end) each
   * asked for one, which kept the simulator from answering for minutes.
   */
  private scheduleSoon(): void {
    if (this.schedulePending) return;
    this.schedulePending = setImmediate(() => {
      this.schedulePending = undefined;
      this.schedule();
    });
  }

  private changed(job: SimJob): void {
    job.lastUpdate = nowSec();
    this.touch();
    // After close() the table was saved and the lock released; a late process event must not write.
    if (!this.closed) {
      this.store.saveSoon(
        () => this.snapshot(),
        (error) => this.options.logger.error({ err: error }, 'could not save the simulator job table'),
      );
    }
  }

  private touch(): void {
    this.lastJobUpdateSec = nowSec();
  }

  private snapshot() {
    return { nextJobId: this.nextJobId, jobs: this.listJobs() };
  }
}

export function signalNumber(signal: NodeJS.Signals): number {
  return constants.signals[signal] ?? 0;
}

/** `TERM` for 15, the way Slurm names signals in `exit_code.signal.name`. */
export function signalName(signal: number): string {
  const found = Object.entries(constants.signals).find(([, n]) => n === signal);
  return found ? found[0].replace(/^SIG/, '') : String(signal);
}

/**
 * A simulator's own folder for jobs that name no working directory: one per state dir (two
 * simulators never share one, and each keeps its folder across restarts), in the temporary
 * folder rather than the state dir, which may lie in schedflow's data dir, where output is
 * never read. Two simulators sharing /tmp wrote each other's `slurm-1000.out`.
 */
export function defaultWorkDir(stateDir: string): string {
  const id = createHash('sha256').update(resolve(stateDir)).digest('hex').slice(0, 12);
  return join(tmpdir(), `schedflow-sim-${id}`);
}

/**
 * Made owner-only if missing; one that is a link or another user's is refused (a shared /tmp).
 * With a job user, jobs of several host users write in it (each submitter with an account
 * here runs as that account, see SubmitterUsers): the simulator's own, sticky and writable to
 * all, as /tmp is, so each writes its own files and none removes another's.
 */
function ensureWorkDir(dir: string, jobUser: JobUser | null): void {
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  const stat = lstatSync(dir);
  const uid = process.getuid?.();
  if (!stat.isDirectory() || (uid !== undefined && stat.uid !== uid)) {
    throw new Error(
      `the simulator's working folder ${dir} is not a folder of this user: remove it, or set the simulator's workDir`,
    );
  }
  // By path after the lstat: safe, as the folder is this user's (root's) and no job user may
  // rename or replace it in a sticky /tmp.
  if (jobUser) chmodSync(dir, 0o1777);
}

/**
 * The job user's scripts: the simulator's own folder, which the job's user may pass through
 * (each script is its own) but not list or write; a link or another user's is refused.
 */
function ensureScriptDir(dir: string): void {
  mkdirSync(dir, { recursive: true, mode: 0o711 });
  const stat = lstatSync(dir);
  if (!stat.isDirectory() || stat.uid !== process.getuid?.()) {
    throw new Error(`the simulator's script folder ${dir} is not a folder of this user: remove it`);
  }
  chmodSync(dir, 0o711);
}
