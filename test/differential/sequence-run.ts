import { randomBytes } from 'node:crypto';
import type { ApiVersion } from '../../src/sched/versions.js';
import { type RawAnswer, type Role, reduceAnswer, type StepRecord } from './reduce.js';
import type { DiffTarget, DiffUser } from './target.js';

/**
 * One run of the differential sequence against a target: sends the steps' requests, keeps
 * their reduced answers in order, knows the run's jobs by role, and waits for their states.
 */

/** A job id no cluster of the tests reaches (Slurm's default MaxJobId is 67043328). */
export const UNKNOWN_JOB_ID = 67_000_000;
export const TERMINAL = new Set(['COMPLETED', 'FAILED', 'CANCELLED', 'TIMEOUT', 'NODE_FAIL', 'OUT_OF_MEMORY']);
const REQUEST_TIMEOUT_MS = 30_000;

type Json = Record<string, unknown>;

export interface SequenceOptions {
  /** Progress lines (the recorder prints them); silent by default. */
  log?: (line: string) => void;
  /** How long to wait for a job or an accounting record to reach a state. */
  waitTimeoutMs?: number;
}

export interface Call {
  method?: 'GET' | 'POST' | 'DELETE';
  /** Path and query with placeholders: `{v}`, `{run}`, `{ok}`, `{failed}`, `{cancelled}`, `{noexec}`, `{nomem}`, `{limited}`, `{held}`, `{unknown}`, `{start}`, `{end}`, `{future}`. */
  path: string;
  /** A JSON body; a string is sent as it is (to send what is not JSON). */
  body?: unknown;
  /** Whose credentials go with it; `none` for none, `bad-token` for alice's name with a token Slurm cannot verify. */
  as?: DiffUser | 'none' | 'bad-token';
}

export class SequenceRun {
  readonly records: StepRecord[] = [];
  readonly roles = new Map<number, Role>();
  private readonly ids = new Map<string, number>();
  private readonly times = new Map<string, number>();
  /** In every job name, so a query by name finds this run's jobs only, not those of an earlier run. */
  readonly runId = randomBytes(3).toString('hex');

  constructor(
    readonly target: DiffTarget,
    readonly version: ApiVersion,
    readonly options: SequenceOptions,
  ) {}

  private fill(template: string): string {
    return template.replace(/\{(\w+)\}/g, (whole, name: string) => {
      if (name === 'v') return this.version;
      if (name === 'run') return this.runId;
      if (name === 'unknown') return String(UNKNOWN_JOB_ID);
      const value = this.ids.get(name) ?? this.times.get(name);
      if (value === undefined) throw new Error(`the sequence has no value for ${whole} yet`);
      return String(value);
    });
  }

  setTime(name: 'start' | 'end' | 'future', sec: number): void {
    this.times.set(name, sec);
  }

  id(role: Role): number {
    const id = this.ids.get(role);
    if (id === undefined) throw new Error(`no ${role} job was submitted`);
    return id;
  }

  async send(call: Call): Promise<RawAnswer> {
    const headers: Record<string, string> = {};
    if (call.as === 'bad-token') Object.assign(headers, this.target.badCredentials);
    else if (call.as !== 'none') Object.assign(headers, this.target.credentials[call.as ?? 'alice']);
    let body: string | undefined;
    if (call.body !== undefined) {
      body = typeof call.body === 'string' ? call.body : JSON.stringify(call.body);
      headers['content-type'] = 'application/json';
    }
    // A raw string URL: fetch keeps a literal comma in the query, which real slurmrestd treats apart from %2C.
    const path = this.fill(call.path)
      .replace(/^\/slurmdb\//, `${this.target.prefixes?.accounting ?? '/slurmdb'}/`)
      .replace(/^\/slurm\//, `${this.target.prefixes?.controller ?? '/slurm'}/`);
    const res = await fetch(`${this.target.url}${path}`, {
      method: call.method ?? 'GET',
      headers,
      body,
      signal: AbortSignal.timeout(REQUEST_TIMEOUT_MS),
    });
    return { status: res.status, contentType: res.headers.get('content-type') ?? '', text: await res.text() };
  }

  /** Sends and records one step. */
  async step(step: string, call: Call): Promise<StepRecord> {
    const answer = await this.send(call);
    const record = reduceAnswer(step, `${call.method ?? 'GET'} ${call.path}`, answer, this.roles);
    this.records.push(record);
    this.options.log?.(`${this.version} ${record.status} ${step}`);
    return record;
  }

  /**
   * Records a submission that plays no part later (a coerced body): the job it makes, if any,
   * is cancelled at once, unrecorded, so it neither holds the node nor counts against limits.
   */
  async submitAside(step: string, body: Json | string): Promise<StepRecord> {
    const answer = await this.send({ method: 'POST', path: '/slurm/{v}/job/submit', body });
    const record = reduceAnswer(step, 'POST /slurm/{v}/job/submit', answer, this.roles);
    this.records.push(record);
    this.options.log?.(`${this.version} ${record.status} ${step}`);
    let jobId: unknown;
    try {
      jobId = (JSON.parse(answer.text) as { job_id?: unknown }).job_id;
    } catch {
      jobId = undefined;
    }
    if (typeof jobId === 'number') await this.send({ method: 'DELETE', path: `/slurm/{v}/job/${jobId}` });
    return record;
  }

  /** Submits a job of the sequence and remembers its id under its role. */
  async submit(
    step: string,
    role: Role,
    script: string,
    as: DiffUser = 'alice',
    interpreter = '#!/bin/bash\n',
    extra: Json = {},
  ): Promise<number> {
    const body = this.jobBody(role, script, { script: `${interpreter}${script}\n`, ...extra });
    const answer = await this.send({ method: 'POST', path: '/slurm/{v}/job/submit', as, body });
    const jobId = (JSON.parse(answer.text) as { job_id?: unknown }).job_id;
    if (answer.status !== 200 || typeof jobId !== 'number') {
      throw new Error(`${this.target.name}: ${step} was refused: HTTP ${answer.status} ${answer.text.slice(0, 500)}`);
    }
    this.ids.set(role, jobId);
    this.roles.set(jobId, role);
    this.records.push(reduceAnswer(step, 'POST /slurm/{v}/job/submit', answer, this.roles));
    this.options.log?.(`${this.version} ${answer.status} ${step} (job ${jobId})`);
    return jobId;
  }

  /**
   * Finds a job of this run that no submit answer named (a refused one) by its name, and follows
   * it. Asked with `update_time=0` (every job, as the plain listing): through the proxy, the plain
   * listing's URL would be answered from this read's copy for the cache's lifetime, and the
   * sequence's own `job listing` step, seconds later on a quick run, got the jobs as they were here.
   */
  async adopt(role: Role): Promise<void> {
    const answer = await this.send({ path: '/slurm/{v}/jobs?update_time=0' });
    const jobs = (JSON.parse(answer.text) as { jobs?: { job_id?: number; name?: string }[] }).jobs ?? [];
    const found = jobs.find((j) => j.name === this.jobName(role));
    if (found?.job_id === undefined) return;
    this.ids.set(role, found.job_id);
    this.roles.set(found.job_id, role);
  }

  jobName(role: string): string {
    return `sf-diff-${role}-${this.version}-${this.runId}`;
  }

  jobBody(role: string, script: string, extra: Json = {}): Json {
    return {
      job: {
        name: this.jobName(role),
        script: `#!/bin/bash\n${script}\n`,
        current_working_directory: this.target.workDir,
        environment: ['PATH=/usr/bin:/bin'],
        ...extra,
      },
    };
  }

  /** The last answer a wait looked at, to say why it timed out. */
  private lastSeen = '';

  private async poll<T>(what: string, check: () => Promise<T | undefined>): Promise<T> {
    const deadline = Date.now() + (this.options.waitTimeoutMs ?? 120_000);
    for (;;) {
      const value = await check();
      if (value !== undefined) return value;
      if (Date.now() > deadline) {
        throw new Error(
          `${this.target.name} ${this.version}: timed out waiting for ${what}; last answer: ${this.lastSeen}`,
        );
      }
      await new Promise((r) => setTimeout(r, 500));
    }
  }

  /** The controller's state flags of the given jobs (repeated job_id, as slurmrestd wants them). */
  private async controllerStates(roles: Role[]): Promise<Map<Role, string[]>> {
    const query = roles.map((r) => `job_id=${this.id(r)}`).join('&');
    const answer = await this.send({ path: `/slurm/{v}/jobs/state?${query}` });
    this.lastSeen = `${answer.status} ${answer.text.slice(0, 300)}`;
    const states = new Map<Role, string[]>();
    if (answer.status !== 200) return states;
    for (const job of (JSON.parse(answer.text) as { jobs?: Json[] }).jobs ?? []) {
      const role = this.roles.get(Number(job.job_id));
      if (role && Array.isArray(job.state)) states.set(role, job.state as string[]);
    }
    return states;
  }

  /** Until each job's base state is one of `wanted`, without COMPLETING or other flags. */
  async waitForControllerStates(roles: Role[], wanted: (state: string) => boolean): Promise<void> {
    await this.poll(`${roles.join(', ')} in the controller`, async () => {
      const states = await this.controllerStates(roles);
      const done = roles.every((r) => {
        const flags = states.get(r);
        return flags?.length === 1 && flags[0] !== undefined && wanted(flags[0]);
      });
      return done ? true : undefined;
    });
  }

  /** Until accounting holds a final record of each job (slurmdbd lags the controller a little). */
  async waitForAccounting(roles: Role[]): Promise<void> {
    const query = roles.map((r) => `step=${this.id(r)}`).join('&');
    await this.poll(`accounting records of ${roles.join(', ')}`, async () => {
      const answer = await this.send({ path: `/slurmdb/{v}/jobs?${query}` });
      this.lastSeen = `${answer.status} ${answer.text.slice(0, 300)}`;
      if (answer.status !== 200) return undefined;
      const jobs = (JSON.parse(answer.text) as { jobs?: { job_id?: number; state?: { current?: string[] } }[] }).jobs;
      const ended = (jobs ?? []).filter((j) => TERMINAL.has(j.state?.current?.[0] ?? ''));
      return roles.every((r) => ended.some((j) => j.job_id === this.id(r))) ? true : undefined;
    });
  }
}
