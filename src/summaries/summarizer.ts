import { upsertAccountingJob } from '../db/accounting.js';
import type { History } from '../db/history.js';
import { type JobUsage, usageOfRunSteps } from '../db/job-usage.js';
import { reserveLlmBudget, settleLlmBudget, utcDay } from '../db/llm-budget.js';
import { getRequest } from '../db/requests.js';
import { getRun, stepRequests } from '../db/runs.js';
import type { AccountingJobRow, JobRequestRow, PipelineRunRow, SummaryRow } from '../db/schema.js';
import {
  accountingOf,
  endedRunsOf,
  getSummary,
  partitionsUsed,
  recordSummaryAttempt,
  settlePendingSummary,
  updatePendingSummary,
} from '../db/summaries.js';
import type { SummaryFindings } from '../db/summary-data.js';
import { addDelivery } from '../db/webhooks.js';
import { toError } from '../errors.js';
import { type Clock, systemClock } from '../lib/clock.js';
import { jobUidOf } from '../lib/host-users.js';
import type { LlmClient } from '../llm/llm-client.js';
import { LlmError } from '../llm/llm-errors.js';
import type { Logger } from '../logger.js';
import type { RunPlan } from '../pipelines/run-plan.js';
import { latestAttempts } from '../pipelines/step-dependencies.js';
import { isTerminalState, type SchedJob } from '../sched/job-model.js';
import { isoOrNull } from '../views/views.js';
import { arrayExcerpt } from './array-excerpt.js';
import { type JobFacts, jobEfficiency, jobFacts, jobTriage, type RunFacts } from './facts.js';
import { jobTemplate, runTemplate } from './fallback-summary.js';
import type { Semaphore } from './limiter.js';
import { type JobFindings, jobPrompt, type RunFindings, runPrompt, tokenBound } from './prompt.js';
import { Redactor } from './redact.js';
import { checkPatterns, type SummarySettings } from './summary-settings.js';
import { runTrend, type TrendRun } from './trend.js';

/** What a trend reads of a step: the same of its facts (this run) and of its usage (earlier runs). */
type TrendFacts = Pick<JobUsage, 'step' | 'state' | 'elapsedSec' | 'timeLimitMin' | 'cpus' | 'cpuTimeSec' | 'spec'>;

/**
 * Writing one summary: the facts of the request or run, the findings
 * (efficiency, triage, suggestion, trend), the template text at once, then
 * the LLM's text when the LLM is on, within budget and answering. A summary
 * never touches the request's or run's own state.
 */

/** The LLM as summaries use it: the client, the per-process bound on calls, and whether it is usable. */
export interface LlmGate {
  client: LlmClient;
  semaphore: Semaphore;
  /** Set when the LLM must not be called (the model check failed): the reason, in words. */
  disabledReason: string | null;
}

export interface SummarizerDeps {
  store: History;
  logger: Logger;
  settings: SummarySettings;
  llm: LlmGate | null;
  /** Literal secrets never to send (the LLM key itself). */
  secrets: readonly string[];
  /** Folders no output file is read from: schedflow's data dir (keys, history) and configuration. */
  protectedDirs?: readonly string[];
  /** The scheduler's accounting record of a job, when the history has none that is final yet. */
  fetchAccounting?(profile: string, jobId: number): Promise<SchedJob | null>;
  /** The daemon's clock: the LLM budget's day and when summaries settle. @defaultValue systemClock */
  clock?: Clock;
}

export type SummarizeOutcome =
  | { outcome: 'done'; kind: 'llm' | 'template'; state: 'ready' | 'failed' }
  | { outcome: 'skipped'; why: string }
  | { outcome: 'retry'; error: Error }
  | { outcome: 'interrupted' };

/** What the facts of a summary came to: the template's text, the stored findings, the prompt. */
interface Prepared {
  template: string;
  findings: SummaryFindings;
  suggestion: JobFindings['suggestion'];
  messages: ReturnType<typeof jobPrompt>;
  redactor: Redactor;
  /** Set when this summary is the template's whatever the LLM (the job never ran). */
  templateOnly: string | null;
  webhookUrl: string | null;
}

export class Summarizer {
  private readonly patterns: RegExp[];

  constructor(private readonly deps: SummarizerDeps) {
    this.patterns = checkPatterns(deps.settings.redactPatterns, 'redactPatterns');
  }

  /** Writes the summary `id` (one attempt). */
  async run(id: string, options: { finalAttempt: boolean; signal?: AbortSignal }): Promise<SummarizeOutcome> {
    const { store, logger, settings } = this.deps;
    const row = await getSummary(store, id);
    if (!row) return { outcome: 'skipped', why: 'no such summary' };
    if (row.state !== 'pending') return { outcome: 'skipped', why: `already ${row.state}` };
    const prepared = await this.prepare(row);
    if (!prepared) {
      await this.finish(row, { state: 'failed', note: 'the request or run is no longer in the history' }, null);
      return { outcome: 'done', kind: 'template', state: 'failed' };
    }
    // The template is stored at once: until the LLM's text comes, this is the summary.
    await updatePendingSummary(store, id, {
      kind: 'template',
      text: prepared.template,
      findings: prepared.findings,
      suggestion: prepared.suggestion,
      note: row.note ?? 'the LLM summary is being written',
    });

    const noLlm = prepared.templateOnly ?? this.whyNoLlm();
    if (noLlm) {
      await this.finish(row, { state: 'ready', kind: 'template', note: noLlm }, prepared.webhookUrl);
      return { outcome: 'done', kind: 'template', state: 'ready' };
    }
    const gate = this.deps.llm as LlmGate;
    const day = utcDay((this.deps.clock ?? systemClock).now());
    const bound = tokenBound(prepared.messages, gate.client.settings.maxOutputTokens);
    const reserved = await reserveLlmBudget(
      store,
      day,
      { maxRequests: settings.dailyRequestLimit, maxTokens: settings.dailyTokenLimit },
      bound,
    );
    if (!reserved.ok) {
      const note = `the LLM budget of the day (UTC ${day}: ${settings.dailyRequestLimit} requests, ${settings.dailyTokenLimit} tokens) is spent (${reserved.used.requests} requests, ${reserved.used.tokens} tokens used${bound > settings.dailyTokenLimit - reserved.used.tokens ? `; this prompt may need up to ${bound}` : ''})`;
      logger.warn({ summaryId: id, day, used: reserved.used }, 'LLM budget spent: template summary');
      await this.finish(row, { state: 'ready', kind: 'template', note }, prepared.webhookUrl);
      return { outcome: 'done', kind: 'template', state: 'ready' };
    }

    let release: (() => void) | undefined;
    let used = 0;
    try {
      release = await gate.semaphore.acquire(options.signal);
      const result = await gate.client.chat(prepared.messages, { signal: options.signal });
      used = (result.promptTokens ?? 0) + (result.completionTokens ?? 0);
      if (result.promptTokens === null && result.completionTokens === null) used = bound;
      await recordSummaryAttempt(store, id, null);
      await this.finish(
        row,
        {
          state: 'ready',
          kind: 'llm',
          text: prepared.redactor.redact(result.text),
          model: result.model,
          promptTokens: result.promptTokens,
          completionTokens: result.completionTokens,
          latencyMs: result.latencyMs,
          note: result.truncated ? `cut at the bound of ${gate.client.settings.maxOutputTokens} output tokens` : null,
          error: null,
          errorCode: null,
        },
        prepared.webhookUrl,
      );
      logger.info({ summaryId: id, model: result.model, latencyMs: result.latencyMs, tokens: used }, 'summary written');
      return { outcome: 'done', kind: 'llm', state: 'ready' };
    } catch (thrown) {
      const error = toError(thrown);
      if (options.signal?.aborted) return { outcome: 'interrupted' };
      const code = error instanceof LlmError ? error.code : 'SCHEDFLOW_ERR_SUMMARY';
      await recordSummaryAttempt(store, id, { code, message: error.message });
      const retryable = error instanceof LlmError ? error.retryable : true;
      const attempts = (await getSummary(store, id))?.attempts ?? 1;
      if (retryable && !options.finalAttempt) {
        logger.warn({ summaryId: id, code, attempts, err: error }, 'LLM summary failed; retrying');
        return { outcome: 'retry', error };
      }
      logger.error({ summaryId: id, code, attempts, err: error }, 'LLM summary failed: template summary kept');
      await this.finish(
        row,
        {
          state: 'failed',
          kind: 'template',
          note: `the LLM failed${retryable ? ` after ${attempts} attempt(s)` : ''}: the template summary stands`,
          error: error.message,
          errorCode: code,
        },
        prepared.webhookUrl,
      );
      return { outcome: 'done', kind: 'template', state: 'failed' };
    } finally {
      release?.();
      await settleLlmBudget(store, day, bound, used);
    }
  }

  /**
   * Settles a summary the queue gave up on outside an attempt (it stalled too
   * often, or facts could not be gathered): failed, with the template when
   * it can still be made.
   */
  async giveUp(id: string, reason: string): Promise<boolean> {
    const row = await getSummary(this.deps.store, id);
    if (row?.state !== 'pending') return false;
    let prepared: Prepared | null = null;
    try {
      prepared = await this.prepare(row, { fetch: false });
    } catch {
      // The facts are what failed: the summary is recorded failed without a text.
    }
    return this.finish(
      row,
      {
        state: 'failed',
        ...(prepared && {
          kind: 'template' as const,
          text: prepared.template,
          findings: prepared.findings,
          suggestion: prepared.suggestion,
        }),
        note: 'the summary could not be written',
        error: reason,
        errorCode: 'SCHEDFLOW_ERR_SUMMARY_GIVEN_UP',
      },
      prepared?.webhookUrl ?? null,
    );
  }

  private whyNoLlm(): string | null {
    const gate = this.deps.llm;
    if (!gate) return 'no LLM endpoint is configured (SCHEDFLOW_LLM_URL): template summary';
    if (gate.disabledReason) return `the LLM is not used: ${gate.disabledReason}`;
    return null;
  }

  /**
   * Settles a pending summary and, when its request or run has a webhook,
   * adds the `summary.ready` delivery in the same transaction.
   */
  private finish(
    row: SummaryRow,
    patch: Partial<Omit<SummaryRow, 'id' | 'requestId' | 'runId' | 'createdAt'>> & { state: 'ready' | 'failed' },
    webhookUrl: string | null,
  ): Promise<boolean> {
    const now = (this.deps.clock ?? systemClock).now();
    return this.deps.store.transaction(async (tx) => {
      // Settled only while still pending: of two settling it at once (the queue giving up while
      // an attempt finishes, on this host or another), one does, and one delivery is added.
      const changed = await settlePendingSummary(tx, row.id, { ...patch, completedAt: now, updatedAt: now });
      if (changed === 0) return false;
      if (webhookUrl) {
        const after = (await getSummary(tx, row.id)) as SummaryRow;
        await addDelivery(tx, {
          event: 'summary.ready',
          url: webhookUrl,
          requestId: row.requestId,
          runId: row.runId,
          payload: summaryReadyBody(after),
          at: now,
        });
      }
      return true;
    });
  }

  // ---- Facts ---------------------------------------------------------------------------

  private async prepare(row: SummaryRow, options: { fetch: boolean } = { fetch: true }): Promise<Prepared | null> {
    const { store } = this.deps;
    if (row.requestId) {
      const request = await getRequest(store, row.requestId);
      return request ? this.prepareJob(request, options.fetch) : null;
    }
    if (row.runId) {
      const run = await getRun(store, row.runId);
      return run ? this.prepareRun(run, options.fetch) : null;
    }
    return null;
  }

  /** The history's accounting record of a request's job; fetched from the scheduler when it is missing or not final. */
  private async accounting(request: JobRequestRow, fetch: boolean): Promise<AccountingJobRow | undefined> {
    const { store, logger } = this.deps;
    const stored = await accountingOf(store, request.profile, request.jobId);
    if (request.jobId === null || !fetch || !this.deps.fetchAccounting) return stored;
    if (stored && isTerminalState(stored.state as SchedJob['state'])) return stored;
    try {
      const job = await this.deps.fetchAccounting(request.profile, request.jobId);
      if (job && isTerminalState(job.state)) {
        await upsertAccountingJob(store, request.profile, job, request.id, (this.deps.clock ?? systemClock).now());
        return await accountingOf(store, request.profile, request.jobId);
      }
    } catch (error) {
      logger.warn(
        { requestId: request.id, jobId: request.jobId, err: error },
        'no accounting record for the summary; its figures stay unknown',
      );
    }
    return stored;
  }

  private redactorFor(facts: readonly JobFacts[]): Redactor {
    return new Redactor({
      environment: facts.flatMap((f) => f.environment),
      literals: this.deps.secrets,
      patterns: this.patterns,
    });
  }

  /**
   * A request's facts with its output: an array's from the task that explains its outcome (it
   * has no one output file), read as `schedflow jobs output --task N` reads it.
   */
  private async factsOf(request: JobRequestRow, accounting: AccountingJobRow | undefined): Promise<JobFacts> {
    const { store, settings } = this.deps;
    const protectedDirs = this.deps.protectedDirs ?? [];
    const array =
      request.arrayTaskCount === null
        ? undefined
        : await arrayExcerpt(store, request, { outputTailBytes: settings.outputTailBytes, protectedDirs });
    return jobFacts(request, accounting, {
      ...settings,
      protectedDirs,
      jobUserUid: await jobUidOf(accounting?.user),
      ...(array && { array }),
    });
  }

  private async prepareJob(request: JobRequestRow, fetch: boolean): Promise<Prepared> {
    const { store } = this.deps;
    const accounting = await this.accounting(request, fetch);
    const facts = await this.factsOf(request, accounting);
    const known =
      request.state === 'submit_failed'
        ? await partitionsUsed(store, request.profile, facts.account, request.owner)
        : undefined;
    const { triage, suggestion } = jobTriage(facts, known);
    // A step's change belongs in its pipeline file: it is kept with the findings, not as an action.
    const findings: JobFindings = { efficiency: jobEfficiency(facts), triage, suggestion };
    const redactor = this.redactorFor([facts]);
    return {
      template: redactor.redact(jobTemplate(facts, findings)),
      findings: { efficiency: findings.efficiency, triage, trend: null },
      suggestion:
        suggestion && request.runId
          ? { ...suggestion, step: request.step ?? undefined, requestId: request.id }
          : suggestion,
      messages: jobPrompt(facts, findings, redactor),
      redactor,
      templateOnly: facts.ran ? null : 'the job never ran, so there is nothing for the LLM to add: template summary',
      webhookUrl: request.webhookUrl,
    };
  }

  private async prepareRun(run: PipelineRunRow, fetch: boolean): Promise<Prepared> {
    const { store } = this.deps;
    const plan = run.definition as RunPlan;
    const rows = await stepRequests(store, run.id);
    const latest = latestAttempts(rows);
    const order = plan.steps.map((s) => s.step);
    const steps: RunFindings['steps'] = [];
    for (const step of order) {
      const request = latest.get(step);
      if (!request) continue;
      const accounting = await this.accounting(request, fetch);
      const facts = await this.factsOf(request, accounting);
      const { triage, suggestion } = jobTriage(facts);
      steps.push({
        facts,
        findings: {
          efficiency: jobEfficiency(facts),
          triage,
          suggestion: suggestion ? { ...suggestion, step, requestId: request.id } : null,
        },
      });
    }
    const runFacts: RunFacts = {
      run,
      steps: steps.map((s) => s.facts),
      attempts: rows.map((r) => ({ step: r.step ?? '', attempt: r.attempt, state: r.state })),
    };
    const trend = await this.trendOf(run, steps);
    const findings: RunFindings = { steps, trend };
    const redactor = this.redactorFor(runFacts.steps);
    const anyRan = runFacts.steps.some((f) => f.ran);
    return {
      template: redactor.redact(runTemplate(runFacts, findings)),
      findings: {
        efficiency: null,
        steps: steps.map((s) => ({
          step: s.facts.step ?? '',
          requestId: s.facts.requestId,
          state: s.facts.state,
          efficiency: s.findings.efficiency,
          triage: s.findings.triage,
        })),
        triage: steps.find((s) => s.findings.triage)?.findings.triage ?? null,
        trend,
      },
      // A run's changes go into the pipeline file; none is applied by resubmission.
      suggestion: null,
      messages: runPrompt(runFacts, findings, redactor),
      redactor,
      templateOnly: anyRan ? null : 'no step of the run ran: template summary',
      webhookUrl: run.webhookUrl,
    };
  }

  /** This run against the pipeline's earlier ended runs (from the history only). */
  private async trendOf(run: PipelineRunRow, steps: RunFindings['steps']): Promise<RunFindings['trend']> {
    const { store, settings } = this.deps;
    if (settings.trendRuns <= 0) return null;
    const earlier = (await endedRunsOf(store, run.pipeline, run.owner, settings.trendRuns + 1))
      .filter((r) => r.id !== run.id && r.createdAt <= run.createdAt)
      .slice(0, settings.trendRuns);
    if (earlier.length === 0) return null;
    const toTrend = (r: PipelineRunRow, facts: readonly TrendFacts[]): TrendRun => ({
      runId: r.id,
      state: r.state,
      createdAt: r.createdAt,
      startedAt: r.startedAt,
      endedAt: r.endedAt,
      steps: facts.map((f) => ({
        step: f.step ?? '',
        state: f.state,
        elapsedSec: f.elapsedSec,
        timeLimitMin: f.timeLimitMin,
        cpus: f.cpus,
        cpuTimeSec: f.cpuTimeSec,
        spec: f.spec,
      })),
    });
    // A few runs of a few steps (trendRuns, 5 by default), read one after another. A step's
    // usage kept by retention (job_usage) stands for its detail, pruned or about to be: the
    // trend is the same before and after a prune.
    const history: TrendRun[] = [];
    for (const r of earlier) history.push(toTrend(r, await usageOfRunSteps(store, r.id)));
    return runTrend(
      toTrend(
        run,
        steps.map((s) => s.facts),
      ),
      history,
    );
  }
}

/** The `summary.ready` webhook body: the summary as stored (never the prompt, the script or the spec). */
export function summaryReadyBody(row: SummaryRow): { summary: Record<string, unknown> } {
  return {
    summary: {
      id: row.id,
      request_id: row.requestId,
      run_id: row.runId,
      state: row.state,
      kind: row.kind,
      text: row.text,
      note: row.note,
      error: row.error,
      model: row.model,
      prompt_tokens: row.promptTokens,
      completion_tokens: row.completionTokens,
      latency_ms: row.latencyMs,
      classification: row.findings?.triage?.classification ?? null,
      suggestion: row.suggestion ? { changes: row.suggestion.changes, why: row.suggestion.why } : null,
      efficiency: row.findings?.efficiency ?? null,
      created_at: new Date(row.createdAt).toISOString(),
      completed_at: isoOrNull(row.completedAt),
    },
  };
}
