import type { History } from '../db/history.js';
import { getRun } from '../db/runs.js';
import type { JobRequestRow, PipelineRunRow, SummaryRow } from '../db/schema.js';
import { summaryOfRequest, summaryOfRun } from '../db/summaries.js';
import { isTerminalRequest } from '../requests/request-state.js';
import { describeEfficiency } from './efficiency.js';
import { applyHint } from './fallback-summary.js';
import { describeSuggestion, describeTriage } from './prompt.js';

/**
 * A request's summary as `schedflow jobs show` prints it (and its JSON): its
 * own, or for a pipeline step without one, its run's.
 */

export interface ShownSummary {
  /** `request` (its own) or `run` (the run's, for a step). */
  of: 'request' | 'run';
  summary: SummaryRow;
}

export async function summaryForRequest(h: History, row: JobRequestRow): Promise<ShownSummary | null> {
  const own = await summaryOfRequest(h, row.id);
  if (own) return { of: 'request', summary: own };
  const run = row.runId ? await summaryOfRun(h, row.runId) : undefined;
  return run ? { of: 'run', summary: run } : null;
}

const indent = (text: string) =>
  text
    .split('\n')
    .map((l) => `          ${l}`)
    .join('\n');

function header(s: SummaryRow): string {
  const who =
    s.kind === 'llm'
      ? `written by ${s.model ?? 'the LLM'}${s.promptTokens !== null ? `, ${s.promptTokens}+${s.completionTokens ?? 0} tokens` : ''}${s.latencyMs !== null ? `, ${(s.latencyMs / 1000).toFixed(1)} s` : ''}`
      : s.kind === 'template'
        ? 'template summary (no LLM)'
        : 'not written yet';
  return `${s.state}, ${who}`;
}

export async function summaryLines(h: History, row: JobRequestRow): Promise<string[]> {
  const lines: string[] = [];
  if (row.resubmitOf) lines.push(`resubmits ${row.resubmitOf} (with its summary's suggested change)`);
  const shown = await summaryForRequest(h, row);
  if (!shown) {
    lines.push(
      `summary   ${isTerminalRequest(row.state) ? (row.summaryCheckedAt ? 'none (summaries are off for this request)' : 'not made yet') : 'when the job has ended'}`,
    );
    return lines;
  }
  const s = shown.summary;
  if (shown.of === 'run') {
    const run = await getRun(h, s.runId ?? '');
    lines.push(
      `summary   of its pipeline run ${s.runId}${run ? ` (${run.pipeline}, ${run.state})` : ''}: ${header(s)}`,
    );
  } else {
    lines.push(`summary   ${header(s)}`);
  }
  if (s.text) lines.push(indent(s.text));
  if (s.note) lines.push(`          (${s.note})`);
  if (s.state === 'failed' && s.error) lines.push(`          LLM error after ${s.attempts} attempt(s): ${s.error}`);
  if (s.state === 'pending' && s.error) lines.push(`          attempt ${s.attempts} failed: ${s.error}; retrying`);
  const findings = s.findings;
  if (findings?.efficiency && shown.of === 'request') {
    const e = describeEfficiency(findings.efficiency);
    lines.push(`cpu       ${e.cpu}`, `memory    ${e.memory}`, `time      ${e.time}`);
  }
  if (findings?.triage && shown.of === 'request') lines.push(`triage    ${describeTriage(findings.triage)}`);
  if (s.suggestion) {
    lines.push(`suggested ${describeSuggestion(s.suggestion)}`);
    if (s.appliedRequestId) {
      lines.push(
        `          applied: request ${s.appliedRequestId}${s.appliedAt ? ` (${new Date(s.appliedAt).toLocaleString()})` : ''}`,
      );
    } else if (!row.runId) {
      lines.push(`          ${applyHint(row.id)}`);
    }
  }
  return lines;
}

/** A run's summary as `schedflow runs show` prints it: one across its steps, once the run has ended. */
export async function runSummaryLines(h: History, run: PipelineRunRow): Promise<string[]> {
  const s = await summaryOfRun(h, run.id);
  if (!s) {
    const ended = run.endedAt !== null;
    return [
      `summary   ${ended ? (run.summaryCheckedAt ? 'none (summaries are off for this run)' : 'not made yet') : 'when the run has ended'}`,
    ];
  }
  const lines = [`summary   ${header(s)}`];
  if (s.text) lines.push(indent(s.text));
  if (s.note) lines.push(`          (${s.note})`);
  if (s.state === 'failed' && s.error) lines.push(`          LLM error after ${s.attempts} attempt(s): ${s.error}`);
  if (s.state === 'pending' && s.error) lines.push(`          attempt ${s.attempts} failed: ${s.error}; retrying`);
  return lines;
}
