import { type FSWatcher, watch } from 'node:fs';
import { basename, extname } from 'node:path';
import type { Queue } from 'bullmq';
import { scheduleActor } from '../access/principal.js';
import { type AuditContext, appendAudit, auditEntryOf } from '../db/audit.js';
import type { History } from '../db/history.js';
import { getRun } from '../db/runs.js';
import { pauseSchedule, resumeSchedule, type SchedulePause, schedulePauses } from '../db/schedule-pauses.js';
import { advanceLastTick, lastTickOf } from '../db/schedule-ticks.js';
import type { PipelineRunRow } from '../db/schema.js';
import { ConfigError, SchedflowError } from '../errors.js';
import { systemClock } from '../lib/clock.js';
import { answerWithin } from '../lib/with-timeout.js';
import { SourceError } from '../lib/yaml-source.js';
import type { Logger } from '../logger.js';
import { WebhookTargets } from '../notify/webhook-target.js';
import { missedFireTimes, nextFireTimes } from './cron-times.js';
import { type LoadContext, type LoadedPipeline, pipelineFiles } from './pipeline-loader.js';
import type { PipelineService, PipelineSummary, TriggerInput } from './pipeline-service.js';
import { loadPipelineSetAsync, PipelineCache } from './pipeline-set.js';
import { cancelRun, createRun, type RunCancelBy, type RunCancelOutcome, type RunEngineDeps } from './run-engine.js';
import { planRun } from './run-plan.js';
import { type RunResumeBy, type RunResumeOutcome, resumeRun } from './run-resume.js';
import { upstreamsOf } from './upstream-links.js';
import { followEndedRuns, followRun, outputsUsedDownstream, upstreamOf } from './upstream-runs.js';

export class PipelineNotFoundError extends SchedflowError {
  readonly code = 'SCHEDFLOW_ERR_PIPELINE_NOT_FOUND';
}

/** Pausing or resuming a pipeline that has no schedule: it only ever runs when triggered. */
export class PipelineNotScheduledError extends SchedflowError {
  readonly code = 'SCHEDFLOW_ERR_PIPELINE_NOT_SCHEDULED';
}

/** A tick processed later than this is a missed tick: catch-up decides about it, by the pipeline's policy. */
export const LATE_TICK_MS = 60_000;
/** How long an admin's pause or resume waits on Redis before leaving its half to the queue keeper. */
const REDIS_ANSWER_MS = 1000;
const SCHEDULER_PREFIX = 'pipeline-';

export interface RegistryDeps {
  dir: string;
  context: LoadContext;
  engine: RunEngineDeps;
  /** The history, for what the registry keeps there (schedule pauses, the last tick of each schedule). */
  store: History;
  /** The `pipeline` queue: schedules are its job schedulers, catch-up adds `fire` jobs to it. */
  queue: Queue;
  logger: Logger;
  /** Which hosts a pipeline's `webhook:` may name (the daemon's allow-list). @defaultValue none inward */
  webhookTargets?: WebhookTargets;
}

/**
 * The pipelines of a folder, loaded and kept current: a changed file is
 * reloaded, and one that no longer passes its checks is reported while the
 * version loaded before keeps running.
 */
export class PipelineRegistry implements PipelineService {
  readonly #deps: RegistryDeps;
  readonly #loaded = new Map<string, LoadedPipeline>();
  /** Problems by file: a file that failed its last load. */
  readonly #errors = new Map<string, string>();
  readonly #cache = new PipelineCache();
  #watcher: FSWatcher | null = null;
  #reloadTimer: NodeJS.Timeout | null = null;
  #onReload: (() => Promise<void>) | null = null;
  /** The load under way: loads run one at a time, and a change during one is read by the next. */
  #loading: Promise<void> = Promise.resolve();
  /**
   * Until this process's first catch-up pass has run, when its job schedulers began to be
   * registered (its start, without the scheduler role): ticks since are theirs (see catchUp).
   */
  #schedulersSince: number;
  #schedulersSynced = false;
  #caughtUpOnce = false;

  constructor(deps: RegistryDeps) {
    this.#deps = deps;
    this.#schedulersSince = this.#now();
  }

  /** The daemon's clock, the run engine's (src/lib/clock.ts). */
  #now(): number {
    return (this.#deps.engine.clock ?? systemClock).now();
  }

  /**
   * Loads every file (those unchanged since the last load come from the
   * cache); an invalid one is reported (log and list) and skipped, and the
   * version of it loaded before, if any, keeps running. Files are checked
   * off the event loop (pipeline-thread.ts), so the API answers meanwhile.
   */
  load(): Promise<void> {
    this.#loading = this.#loading.then(() => this.#load());
    return this.#loading;
  }

  async #load(): Promise<void> {
    const files = pipelineFiles(this.#deps.dir);
    const { results, checked } = await loadPipelineSetAsync(files, this.#deps.context, this.#cache);
    this.#deps.logger.debug({ files: files.length, checked: checked.length }, 'pipelines folder read');
    const failing = new Set(results.filter((r) => r.error).map((r) => r.file));
    const seen = new Set<string>();
    const byFile = new Map([...this.#loaded.values()].map((p) => [p.file, p]));
    for (const result of results) {
      const { file } = result;
      const before = byFile.get(file);
      let error = result.error;
      const pipeline = result.pipeline;
      // The one thing a set of files cannot know: a name still held by the version
      // loaded before of a file that now fails (that version keeps running).
      const holder = pipeline ? this.#loaded.get(pipeline.name) : undefined;
      if (pipeline && holder && holder.file !== file && failing.has(holder.file)) {
        error = new SourceError([
          `${file}: pipeline name "${pipeline.name}" is also used by ${holder.file} (its version loaded before keeps running while that file is invalid)`,
        ]);
      }
      // Said when the file is read, not first when a run ends and its delivery is refused.
      const webhook = pipeline?.def.webhook;
      const inward = webhook ? (this.#deps.webhookTargets ?? new WebhookTargets()).refusal(new URL(webhook)) : null;
      if (inward && !error) error = new SourceError([`${file}: webhook: ${inward}`]);
      if (pipeline && !error) {
        if (before && before.name !== pipeline.name) this.#loaded.delete(before.name);
        seen.add(pipeline.name);
        this.#errors.delete(file);
        if (before?.hash !== pipeline.hash) {
          this.#loaded.set(pipeline.name, pipeline);
          this.#deps.logger.info({ pipeline: pipeline.name, file }, before ? 'pipeline reloaded' : 'pipeline loaded');
        }
        continue;
      }
      const message = error?.message ?? '';
      if (this.#errors.get(file) !== message) {
        this.#deps.logger.error(
          { file, problems: message.split('\n'), keeps: before ? 'the version loaded before' : 'nothing' },
          'invalid pipeline file',
        );
      }
      this.#errors.set(file, message);
      if (before) seen.add(before.name);
    }
    for (const [name, pipeline] of this.#loaded) {
      if (!seen.has(name)) {
        this.#loaded.delete(name);
        this.#deps.logger.info({ pipeline: name, file: pipeline.file }, 'pipeline removed');
      }
    }
    const present = new Set(files);
    for (const file of this.#errors.keys()) if (!present.has(file)) this.#errors.delete(file);
  }

  /** Reloads on changes in the folder (debounced), then runs `onReload` (the scheduler role re-syncs schedules). */
  watch(onReload?: () => Promise<void>): void {
    this.#onReload = onReload ?? null;
    try {
      this.#watcher = watch(this.#deps.dir, () => this.#scheduleReload());
    } catch (error) {
      // No such folder is a set-up without pipelines, said plainly (a stack trace would read as a fault).
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') {
        this.#deps.logger.info(
          { dir: this.#deps.dir },
          'no pipelines folder: no pipelines until it is made and schedflow restarted',
        );
        return;
      }
      this.#deps.logger.warn({ dir: this.#deps.dir, err: error }, 'not watching the pipelines folder');
    }
  }

  #scheduleReload(): void {
    if (this.#reloadTimer) clearTimeout(this.#reloadTimer);
    this.#reloadTimer = setTimeout(() => {
      this.#reloadTimer = null;
      this.load()
        .then(() => this.#onReload?.())
        .catch((error: Error) => this.#deps.logger.error({ err: error }, 'could not apply reloaded pipelines'));
    }, 250);
  }

  close(): void {
    this.#watcher?.close();
    if (this.#reloadTimer) clearTimeout(this.#reloadTimer);
  }

  pipeline(name: string): LoadedPipeline | undefined {
    return this.#loaded.get(name);
  }

  async list(): Promise<PipelineSummary[]> {
    const pauses = await schedulePauses(this.#deps.store);
    const summaries = [...this.#loaded.values()].map((p) => this.#summary(p, pauses.get(p.name)));
    for (const [file, error] of this.#errors) {
      const current = summaries.find((s) => s.file === file);
      if (current) current.error = error;
      else summaries.push(brokenSummary(file, error));
    }
    return summaries.sort((a, b) => a.name.localeCompare(b.name));
  }

  async get(name: string): Promise<PipelineSummary | undefined> {
    return (await this.list()).find((s) => s.name === name);
  }

  #summary(p: LoadedPipeline, pause: SchedulePause | undefined): PipelineSummary {
    const schedule = p.def.schedule;
    return {
      name: p.name,
      file: p.file,
      description: p.def.description ?? null,
      owner: p.def.owner,
      allow: [...p.def.allow],
      profile: p.profile,
      steps: p.order.map((step) => ({ name: step, needs: (p.needs[step] ?? []).map((n) => n.step) })),
      schedule: schedule
        ? {
            cron: schedule.cron,
            timezone: schedule.timezone,
            enabled: schedule.enabled,
            overlap: schedule.overlap,
            catchup: schedule.catchup,
            next:
              schedule.enabled && !pause
                ? nextFireTimes(schedule.cron, schedule.timezone, this.#now(), 5).map((t) => new Date(t).toISOString())
                : [],
            paused: pause ? { by: pause.by, at: new Date(pause.at).toISOString() } : null,
          }
        : null,
      on: upstreamsOf(p).map(([end, pipeline]) => ({ end, pipeline })),
      params: Object.fromEntries(Object.entries(p.def.params).map(([k, v]) => [k, v === null ? null : String(v)])),
      error: this.#errors.get(p.file) ?? null,
    };
  }

  /** A run now, whatever is active (a person asked for it): overlap applies to scheduled ticks only. */
  async trigger(name: string, input: TriggerInput): Promise<PipelineRunRow> {
    const audit: AuditContext = { actor: input.actor, httpRequestId: input.httpRequestId ?? null };
    try {
      const pipeline = this.#loadedOrThrow(name);
      return await createRun(this.#deps.engine, pipeline, {
        trigger: input.trigger,
        triggeredBy: input.triggeredBy ?? null,
        actor: input.actor,
        params: input.params ?? {},
        webhookUrl: input.webhookUrl ?? null,
        audit,
      });
    } catch (error) {
      // Refused (no such pipeline, a bad parameter, the door): no run was made, the row is alone.
      if (error instanceof SchedflowError) await this.#refused(audit, name, 'run.trigger', error);
      throw error;
    }
  }

  /** The audit row of a refused action on pipeline `name`, written alone: nothing changed. */
  async #refused(audit: AuditContext, name: string, action: string, error: Error): Promise<void> {
    await appendAudit(
      this.#deps.store,
      auditEntryOf(audit, {
        at: this.#now(),
        owner: this.#loaded.get(name)?.def.owner ?? null,
        action,
        target: `pipeline:${name}`,
        outcome: 'refused',
        detail: error.message,
      }),
    );
  }

  /** Cancels a run of any pipeline, even one whose file is gone: the run carries its own definition. */
  cancelRun(runId: string, by: RunCancelBy): Promise<RunCancelOutcome> {
    return cancelRun(this.#deps.engine, runId, by);
  }

  /**
   * Resumes a run; changed parameters re-render its steps from the pipeline as loaded now (a
   * resume without them needs no file: the run carries its own definition).
   */
  async resumeRun(runId: string, by: RunResumeBy): Promise<RunResumeOutcome> {
    // An end not followed yet (ended by a cancel, or while no scheduler ran) is followed now:
    // the resume starts a new end, and this one's followers get their runs first.
    const ended = await getRun(this.#deps.store, runId);
    if (ended && ended.downstreamCheckedAt === null && ['failed', 'cancelled'].includes(ended.state)) {
      await followRun(this.#deps.engine, () => this.#loaded.values(), ended);
    }
    return resumeRun(this.#deps.engine, runId, by, async (tx, run, params) =>
      planRun(this.#loadedOrThrow(run.pipeline), {
        runId: run.id,
        trigger: run.trigger,
        createdAt: run.createdAt,
        scheduledFor: run.scheduledFor,
        params,
        ...(run.upstreamRunId !== null && { upstream: await upstreamOf(tx, run) }),
      }),
    );
  }

  /** The steps of `pipeline` whose outputs the loaded pipelines that follow it use (`${upstream.outputs.…}`). */
  outputsUsedDownstream(pipeline: string): ReadonlySet<string> {
    return outputsUsedDownstream(this.#loaded.values(), pipeline);
  }

  /** Makes the runs that ended runs start (other pipelines' `on:`): each pipeline tick. */
  followUpstream(): Promise<PipelineRunRow[]> {
    return followEndedRuns(this.#deps.engine, () => this.#loaded.values());
  }

  #loadedOrThrow(name: string): LoadedPipeline {
    const pipeline = this.#loaded.get(name);
    if (!pipeline) {
      const known = [...this.#loaded.keys()].join(', ') || 'none loaded';
      throw new PipelineNotFoundError(`no pipeline "${name}" (pipelines: ${known})`);
    }
    return pipeline;
  }

  /**
   * Pauses the schedule: recorded in the history first (the truth every process
   * reads), then its job scheduler goes. The job schedulers live in Redis,
   * shared by every process, so whichever one took the pause applies it;
   * removing one also drops its next delayed tick, and `fire` checks the
   * history for a tick a worker already holds.
   */
  async pause(name: string, by: string, audit?: AuditContext): Promise<PipelineSummary> {
    const pipeline = await this.#scheduledFor(name, 'schedule.pause', audit);
    const at = this.#now();
    await this.#deps.store.transaction(async (tx) => {
      const paused = (await pauseSchedule(tx, name, { by, at })) > 0;
      await this.#changed(tx, audit, pipeline, 'schedule.pause', paused ? null : 'already paused', at);
    });
    await this.#inRedis(name, 'pause', () => this.#deps.queue.removeJobScheduler(schedulerId(name)));
    this.#deps.logger.info({ pipeline: name, by }, 'pipeline schedule paused');
    return this.#summary(pipeline, (await schedulePauses(this.#deps.store)).get(name));
  }

  /**
   * The Redis half of a pause or resume. The history already holds the decision, so a Redis
   * that does not answer must not hold up the admin: the queue keeper puts the job schedulers
   * in line with the history when Redis is back (ensureSchedules), and `fire` ignores a paused
   * schedule's ticks meanwhile.
   */
  async #inRedis(name: string, what: 'pause' | 'resume', op: () => Promise<unknown>): Promise<void> {
    // Only silence is left to the keeper: an error Redis did answer is the admin's to see.
    if ((await answerWithin(op(), REDIS_ANSWER_MS)).answered) return;
    this.#deps.logger.warn(
      { pipeline: name },
      `${what} recorded; Redis did not answer within ${REDIS_ANSWER_MS} ms, so its job scheduler is updated once Redis is back`,
    );
  }

  /** Lifts a pause and puts the job scheduler back, unless the file switches the schedule off (the file wins). */
  async resume(name: string, by: string, audit?: AuditContext): Promise<PipelineSummary> {
    const pipeline = await this.#scheduledFor(name, 'schedule.resume', audit);
    const at = this.#now();
    await this.#deps.store.transaction(async (tx) => {
      const resumed = (await resumeSchedule(tx, name, at)) > 0;
      await this.#changed(tx, audit, pipeline, 'schedule.resume', resumed ? null : 'not paused', at);
    });
    if (pipeline.def.schedule?.enabled) await this.#inRedis(name, 'resume', () => this.#upsertScheduler(pipeline));
    this.#deps.logger.info(
      { pipeline: name, by, fileEnabled: pipeline.def.schedule?.enabled },
      'pipeline schedule resumed',
    );
    return this.#summary(pipeline, undefined);
  }

  /**
   * The audit row of a pause or resume, in its transaction: `ok`, or `refused` with why when
   * there was nothing to change (`unchanged`).
   */
  async #changed(
    tx: History,
    audit: AuditContext | undefined,
    pipeline: LoadedPipeline,
    action: string,
    unchanged: string | null,
    at: number,
  ): Promise<void> {
    if (!audit) return;
    await appendAudit(
      tx,
      auditEntryOf(audit, {
        at,
        owner: pipeline.def.owner,
        action,
        target: `pipeline:${pipeline.name}`,
        outcome: unchanged === null ? 'ok' : 'refused',
        detail: unchanged,
      }),
    );
  }

  /** The scheduled pipeline, or the refusal (then written to the audit log, alone). */
  async #scheduledFor(name: string, action: string, audit: AuditContext | undefined): Promise<LoadedPipeline> {
    try {
      return this.#scheduledOrThrow(name);
    } catch (error) {
      if (audit && error instanceof SchedflowError) await this.#refused(audit, name, action, error);
      throw error;
    }
  }

  #scheduledOrThrow(name: string): LoadedPipeline {
    const pipeline = this.#loadedOrThrow(name);
    if (!pipeline.def.schedule) {
      throw new PipelineNotScheduledError(`pipeline "${name}" has no schedule: it runs only when triggered`);
    }
    return pipeline;
  }

  /** A cron tick (or a catch-up of one): a run, unless the pipeline's overlap policy says otherwise. */
  async fire(name: string, scheduledFor: number, trigger: 'schedule' | 'catchup'): Promise<PipelineRunRow | null> {
    const { logger, engine } = this.#deps;
    const pipeline = this.#loaded.get(name);
    const schedule = pipeline?.def.schedule;
    if (!pipeline || !schedule?.enabled) {
      logger.info({ pipeline: name }, 'tick of a pipeline that is gone or off in its file: ignored');
      return null;
    }
    // A tick taken just before an admin's pause removed its scheduler, or queued by a
    // process that has not seen the pause: the history has the last word.
    const pause = (await schedulePauses(this.#deps.store)).get(name);
    if (pause) {
      logger.info({ pipeline: name, pausedBy: pause.by, scheduledFor }, 'tick of a paused schedule: ignored');
      return null;
    }
    if (trigger === 'schedule' && this.#now() - scheduledFor > LATE_TICK_MS) {
      // Late (schedflow was down or busy): catch-up decides, by the pipeline's policy.
      return null;
    }
    let run: PipelineRunRow;
    try {
      // The overlap policy is applied where the run is made, with what is active read there.
      run = await createRun(engine, pipeline, {
        trigger,
        actor: scheduleActor(name),
        params: {},
        scheduledFor,
        overlap: schedule.overlap,
      });
    } catch (error) {
      if (error instanceof ConfigError) {
        logger.error({ pipeline: name, err: error }, 'scheduled run could not be made');
        return null;
      }
      throw error;
    }
    // Never moves the mark back (a late tick, or one of another host): see upsertSchedule.
    await upsertSchedule(this.#deps.store, name, scheduledFor, this.#now());
    return run;
  }

  /**
   * Ticks missed while schedflow was down (or too busy to fire them in time),
   * per pipeline: none, the latest, or all up to the limit, fired as catch-up
   * runs. A paused pipeline (by its file or by an admin) has nothing to catch
   * up when it resumes.
   */
  async catchUp(now = this.#now()): Promise<number> {
    const { store } = this.#deps;
    const pauses = await schedulePauses(store);
    // A running process leaves the last minute to its job schedulers (fire takes a tick up to
    // LATE_TICK_MS late). The first pass owns that minute up to when they were registered: a
    // tick in it before this start has no scheduler to fire it, and a later pass would make it
    // a second catch-up of one downtime. Not beyond: a tick since is the schedulers', and would
    // take the place of the one really missed under `catchup: latest`.
    const until = this.#caughtUpOnce ? now - LATE_TICK_MS : Math.min(now, this.#schedulersSince);
    let queued = 0;
    for (const pipeline of this.#loaded.values()) {
      const schedule = pipeline.def.schedule;
      if (!schedule) continue;
      const lastScheduledFor = await lastTickOf(store, pipeline.name);
      if (!schedule.enabled || pauses.has(pipeline.name) || lastScheduledFor === null) {
        // Nothing before now is owed to a schedule seen for the first time, off or paused:
        // marking `until` instead would let the next pass catch up a tick from a minute ago.
        await upsertSchedule(store, pipeline.name, now, this.#now());
        continue;
      }
      if (lastScheduledFor >= until) continue;
      const limit = schedule.catchup === 'all' ? schedule.catchup_limit : 1;
      const missed = missedFireTimes(schedule.cron, schedule.timezone, lastScheduledFor, until, limit);
      if (missed.total > 0) {
        const fired = schedule.catchup === 'none' ? [] : missed.times;
        this.#deps.logger.warn(
          { pipeline: pipeline.name, missed: missed.total, catchup: schedule.catchup, firing: fired.length },
          'missed schedule ticks',
        );
        for (const t of fired) {
          await this.#deps.queue.add(
            'fire',
            { pipeline: pipeline.name, scheduledFor: t, trigger: 'catchup' },
            { jobId: `fire-${pipeline.name}-${t}` },
          );
          queued++;
        }
      }
      // Two hosts catching up at once fire the same ticks: a fire job's id, and a tick's one run, make them once.
      await upsertSchedule(store, pipeline.name, until, this.#now());
    }
    // Only once every pipeline has had it: a pass that failed half-way is the first again.
    this.#caughtUpOnce = true;
    return queued;
  }

  /** Registers each scheduled, enabled and not paused pipeline as a BullMQ job scheduler and removes the others. */
  async syncSchedules(): Promise<void> {
    if (!this.#schedulersSynced) {
      this.#schedulersSynced = true;
      this.#schedulersSince = this.#now();
    }
    const { queue } = this.#deps;
    const pauses = await schedulePauses(this.#deps.store);
    const wanted = new Set<string>();
    for (const p of this.#loaded.values()) {
      if (!p.def.schedule?.enabled || pauses.has(p.name)) continue;
      wanted.add(schedulerId(p.name));
      await this.#upsertScheduler(p);
    }
    for (const scheduler of await queue.getJobSchedulers()) {
      if (scheduler.key.startsWith(SCHEDULER_PREFIX) && !wanted.has(scheduler.key)) {
        await queue.removeJobScheduler(scheduler.key);
      }
    }
  }

  /**
   * Puts back the job schedulers of scheduled, enabled and not paused pipelines that are
   * missing from Redis (restarted without its data); returns how many. One read each.
   */
  async ensureSchedules(): Promise<number> {
    const pauses = await schedulePauses(this.#deps.store);
    let added = 0;
    for (const p of this.#loaded.values()) {
      if (!p.def.schedule?.enabled) continue;
      if (pauses.has(p.name)) {
        // Paused while Redis did not answer: its scheduler goes now (unless resumed meanwhile).
        const scheduler = await this.#deps.queue.getJobScheduler(schedulerId(p.name));
        if (scheduler && (await schedulePauses(this.#deps.store)).has(p.name)) {
          await this.#deps.queue.removeJobScheduler(schedulerId(p.name));
        }
        continue;
      }
      if (await this.#deps.queue.getJobScheduler(schedulerId(p.name))) continue;
      await this.#upsertScheduler(p);
      added++;
    }
    return added;
  }

  async #upsertScheduler(p: LoadedPipeline): Promise<void> {
    const schedule = p.def.schedule;
    if (!schedule) return;
    await this.#deps.queue.upsertJobScheduler(
      schedulerId(p.name),
      { pattern: schedule.cron, tz: schedule.timezone },
      { name: 'fire', data: { pipeline: p.name, trigger: 'schedule' } },
    );
  }
}

const schedulerId = (pipeline: string): string => `${SCHEDULER_PREFIX}${pipeline}`;

/** Moves a schedule's last tick forward, never back (see advanceLastTick). */
function upsertSchedule(h: History, pipeline: string, lastScheduledFor: number, now: number): Promise<void> {
  return advanceLastTick(h, pipeline, lastScheduledFor, now);
}

function brokenSummary(file: string, error: string): PipelineSummary {
  return {
    name: basename(file, extname(file)),
    file,
    description: null,
    // A file that never loaded names no owner the daemon could read: no owner's name (OWNER_NAME
    // never matches ''), so only admins and auditors see it and its error.
    owner: '',
    allow: [],
    profile: null,
    steps: [],
    schedule: null,
    on: [],
    params: {},
    error,
  };
}
