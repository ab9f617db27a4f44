import type { Efficiency, RunTrend, SpecSuggestion, Triage } from '../db/summary-data.js';
import type { ChatMessage } from '../llm/llm-client.js';
import { describeEfficiency, formatSeconds } from './efficiency.js';
import type { JobFacts, RunFacts } from './facts.js';
import type { Redactor } from './redact.js';
import { explainReason, signalName } from './slurm-reasons.js';

/**
 * The prompt: fixed instructions, then the facts as `Label: value` lines and
 * fenced blocks for the script head and output tails. Efficiency, triage and
 * the suggestion are computed beforehand (they are data, not the model's
 * guesses); the model puts them into words. The whole text is redacted last.
 */

export const SYSTEM_PROMPT = [
  'You summarise finished Slurm batch jobs for the person who submitted them.',
  'Use only the facts given. A figure marked "not known" was not recorded: say so, never estimate it.',
  'Write plain text, at most 120 words: what ran and how it ended; how efficiently it used its CPUs, memory and time;',
  'for a job that did not complete, the likely cause in plain words and the suggested change, if one is given.',
  'Do not repeat the script or the output, and never repeat anything shown as [redacted].',
].join(' ');

const iso = (ms: number | null) => (ms === null ? 'unknown' : new Date(ms).toISOString());

export function describeSuggestion(s: SpecSuggestion): string {
  const changes = Object.entries(s.changes);
  if (changes.length === 0) return `submit it again unchanged (${s.why})`;
  const parts = changes.map(([key, value]) => {
    const before = s.previous[key];
    const shown = (v: unknown) => (Array.isArray(v) ? v.join(',') : String(v));
    return `${key} ${before === null || before === undefined ? '(not set)' : shown(before)} → ${shown(value)}`;
  });
  return `${parts.join(', ')} (${s.why})`;
}

export function describeTriage(t: Triage): string {
  const reason = t.reason ? `; Slurm's reason ${t.reason.code}: ${t.reason.meaning}` : '';
  const evidence = t.evidence.length ? `; evidence: ${t.evidence.join(' | ')}` : '';
  return `${t.classification.replaceAll('_', ' ')}: ${t.cause}${reason}${evidence}`;
}

/** "failed after 3 min 2 s (exit code 1)". */
export function describeOutcome(f: JobFacts): string {
  const parts: string[] = [f.state];
  if (f.ran && f.elapsedSec !== null) parts.push(`after ${formatSeconds(f.elapsedSec)}`);
  if (!f.ran) parts.push('(it never ran)');
  if (f.signal) parts.push(`(${signalName(f.signal)})`);
  else if (f.exitCode !== null && f.ran) parts.push(`(exit code ${f.exitCode})`);
  if (f.array) parts.push(`(${f.array})`);
  return parts.join(' ');
}

function resources(f: JobFacts): string {
  const limit =
    f.timeLimitMin === null ? 'not known' : f.timeLimitMin === 'infinite' ? 'UNLIMITED' : `${f.timeLimitMin} min`;
  return [
    `${f.cpus ?? 'unknown number of'} CPU(s)`,
    `memory requested ${f.requestedMemoryMb !== null ? `${f.requestedMemoryMb} MB` : 'not known (partition default)'}`,
    `time limit ${limit}`,
    `partition ${f.partition ?? 'default'}`,
    `account ${f.account ?? 'default'}`,
    `nodes ${f.nodes ?? 'none'}`,
  ].join(', ');
}

function fenced(text: string): string[] {
  return ['<<<', text.replace(/\n+$/, ''), '>>>'];
}

export interface JobFindings {
  efficiency: Efficiency;
  triage: Triage | null;
  suggestion: SpecSuggestion | null;
}

/** The facts lines of one job. `detail` adds the script head and output tails. */
export function jobFactLines(f: JobFacts, findings: JobFindings, detail: boolean): string[] {
  const e = describeEfficiency(findings.efficiency);
  const reason = explainReason(f.reason);
  const lines = [
    `Job: ${f.name}${f.jobId !== null ? ` (Slurm job ${f.jobId})` : ''}${f.step ? `, step ${f.step} attempt ${f.attempt}` : ''}`,
    `Outcome: ${describeOutcome(f)}${f.rawState ? `; Slurm state ${f.rawState}` : ''}${reason ? `; reason ${reason.code}: ${reason.meaning}` : ''}`,
    `Times: submitted ${iso(f.submittedAt)}, started ${iso(f.startedAt)}, ended ${iso(f.endedAt)}`,
    `Resources: ${resources(f)}`,
    'Efficiency:',
    `CPU: ${e.cpu}`,
    `Memory: ${e.memory}`,
    `Time: ${e.time}`,
  ];
  if (!f.hasAccounting && f.ran) lines.push('Accounting: no accounting record was available');
  if (f.errorMessage && f.state === 'submit_failed') lines.push(`Refusal: ${f.errorMessage}`);
  if (findings.triage) lines.push(`Triage: ${describeTriage(findings.triage)}`);
  if (findings.suggestion) lines.push(`Suggested change: ${describeSuggestion(findings.suggestion)}`);
  if (!detail) return lines;
  if (f.environmentNames.length) {
    lines.push(`Environment variables set (values withheld): ${f.environmentNames.join(', ')}`);
  }
  if (f.script) {
    lines.push(`Script (first ${f.script.shownLines} of ${f.script.totalLines} lines):`, ...fenced(f.script.head));
  }
  for (const o of f.outputs) {
    if (o.text === null) {
      lines.push(`Output ${o.label} ${o.path}: ${o.note ?? 'not available'}`);
    } else if (o.text.trim() === '') {
      lines.push(`Output ${o.label} ${o.path}: empty`);
    } else {
      lines.push(
        `Output ${o.label} ${o.path} (last ${Buffer.byteLength(o.text)} of ${o.sizeBytes ?? '?'} bytes):`,
        ...fenced(o.text),
      );
    }
  }
  return lines;
}

export function jobPrompt(f: JobFacts, findings: JobFindings, redactor: Redactor): ChatMessage[] {
  const user = ['Summarise this finished job.', '', ...jobFactLines(f, findings, true)].join('\n');
  return [
    { role: 'system', content: SYSTEM_PROMPT },
    { role: 'user', content: redactor.redact(user) },
  ];
}

export function trendLines(trend: RunTrend): string[] {
  const lines: string[] = [];
  const earlier = trend.runs.length - 1;
  lines.push(
    `Trend: ${earlier} earlier run(s)${trend.comparison ? `; this run took ${trend.comparison}` : ''}; states ${trend.runs.map((r) => r.state).join(', ')} (newest first)`,
  );
  for (const step of trend.steps) {
    if (step.resize) lines.push(`Resize ${step.step}: ${describeSuggestion(step.resize)}`);
  }
  return lines;
}

export interface RunFindings {
  steps: { facts: JobFacts; findings: JobFindings }[];
  trend: RunTrend | null;
}

export function runFactLines(facts: RunFacts, findings: RunFindings, detail: boolean): string[] {
  const { run } = facts;
  const counts = new Map<string, number>();
  for (const s of facts.steps) counts.set(s.state, (counts.get(s.state) ?? 0) + 1);
  const duration =
    run.startedAt !== null && run.endedAt !== null ? formatSeconds((run.endedAt - run.startedAt) / 1000) : null;
  const retried = facts.attempts.filter((a) => a.attempt > 1).length;
  const lines = [
    `Run: pipeline ${run.pipeline}, triggered by ${run.trigger} at ${iso(run.createdAt)}${facts.scheduled ? ' (scheduled)' : ''}`,
    `Outcome: ${run.state}${duration ? ` after ${duration}` : ''}; ${facts.steps.length} step(s): ${[...counts].map(([s, n]) => `${n} ${s}`).join(', ')}${retried ? `; ${retried} retried attempt(s)` : ''}${run.detail ? `; ${run.detail}` : ''}`,
  ];
  const failed = findings.steps.find((s) => s.findings.triage);
  if (failed?.findings.triage)
    lines.push(`Triage: step ${failed.facts.step}: ${describeTriage(failed.findings.triage)}`);
  if (failed?.findings.suggestion) {
    lines.push(`Suggested change: step ${failed.facts.step}: ${describeSuggestion(failed.findings.suggestion)}`);
  }
  if (findings.trend) lines.push(...trendLines(findings.trend));
  lines.push('Steps:');
  for (const { facts: f, findings: sf } of findings.steps) {
    const e = describeEfficiency(sf.efficiency);
    lines.push(`- ${f.step}: ${describeOutcome(f)}; CPU ${e.cpu}; memory ${e.memory}; time ${e.time}`);
    if (sf.triage && sf !== failed?.findings) lines.push(`  Triage: ${describeTriage(sf.triage)}`);
    if (sf.suggestion && sf !== failed?.findings)
      lines.push(`  Suggested change: ${describeSuggestion(sf.suggestion)}`);
  }
  if (detail) {
    for (const { facts: f } of findings.steps.filter((s) => s.findings.triage && s.facts.ran)) {
      for (const o of f.outputs.filter((o) => o.text?.trim())) {
        lines.push(
          `Output of step ${f.step} (${o.label}, last ${Buffer.byteLength(o.text ?? '')} bytes):`,
          ...fenced(o.text ?? ''),
        );
      }
    }
  }
  return lines;
}

export function runPrompt(facts: RunFacts, findings: RunFindings, redactor: Redactor): ChatMessage[] {
  const user = [
    'Summarise this finished pipeline run as a whole, across its steps.',
    '',
    ...runFactLines(facts, findings, true),
  ].join('\n');
  return [
    { role: 'system', content: SYSTEM_PROMPT },
    { role: 'user', content: redactor.redact(user) },
  ];
}

/**
 * An upper bound of the tokens a call can use: the prompt's bytes (a token is
 * at least a byte for the tokenizers in use), the chat format's overhead, and
 * the output bound. The daily budget reserves this much before a call.
 */
export function tokenBound(messages: readonly ChatMessage[], maxOutputTokens: number): number {
  return messages.reduce((sum, m) => sum + Buffer.byteLength(m.content, 'utf8') + 8, 0) + maxOutputTokens;
}
