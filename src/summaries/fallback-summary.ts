import { explainReason } from '../sched/slurm-reasons.js';
import { runStartedBy } from '../views/run-start.js';
import { describeEfficiency, formatSeconds } from './efficiency.js';
import type { JobFacts, RunFacts } from './facts.js';
import {
  describeExcerptTask,
  describeOutcome,
  describeSuggestion,
  describeTriage,
  type JobFindings,
  type RunFindings,
} from './prompt.js';

/**
 * The summary without an LLM: a fixed template filled with the same facts
 * and findings the prompt carries. Stored when the LLM is off, out of budget
 * or failing, so every finished job has a summary.
 */

export function applyHint(requestId: string): string {
  return `apply it with: schedflow jobs resubmit ${requestId} --apply-suggestion`;
}

export function jobTemplate(f: JobFacts, findings: JobFindings): string {
  const lines: string[] = [];
  const where = [
    f.jobId !== null ? `Slurm job ${f.jobId}` : null,
    f.partition ? `partition ${f.partition}` : null,
    f.nodes ? `on ${f.nodes}` : null,
  ]
    .filter(Boolean)
    .join(', ');
  lines.push(`${f.name} ${describeOutcome(f)}${where ? ` (${where})` : ''}.`);
  const reason = explainReason(f.reason);
  if (reason && !findings.triage) lines.push(`Slurm's reason ${reason.code}: ${reason.meaning}.`);
  if (f.ran) {
    const e = describeEfficiency(findings.efficiency);
    lines.push(`CPU: ${e.cpu}.`, `Memory: ${e.memory}.`, `Time: ${e.time}.`);
  }
  if (findings.triage) lines.push(`Likely cause: ${describeTriage(findings.triage)}.`);
  const from = f.arrayTasks?.excerptFrom;
  if (from && f.ran) {
    lines.push(
      `Tasks: ${f.arrayTasks?.counts}. Output to read: ${describeExcerptTask(from)}: schedflow jobs output ${f.requestId} --task ${from.taskId}.`,
    );
  }
  if (findings.suggestion) {
    lines.push(
      `Suggested change: ${describeSuggestion(findings.suggestion)}${f.runId ? ' (a pipeline step: change it in the pipeline file).' : `; ${applyHint(f.requestId)}.`}`,
    );
  }
  return lines.join('\n');
}

export function runTemplate(facts: RunFacts, findings: RunFindings): string {
  const { run } = facts;
  const duration =
    run.startedAt !== null && run.endedAt !== null
      ? ` after ${formatSeconds((run.endedAt - run.startedAt) / 1000)}`
      : '';
  const lines = [
    `Pipeline ${run.pipeline} (started by ${runStartedBy(run)}) ${run.state}${duration}${run.detail ? `: ${run.detail}` : ''}.`,
  ];
  for (const { facts: f, findings: sf } of findings.steps) {
    const e = describeEfficiency(sf.efficiency);
    lines.push(`- ${f.step}: ${describeOutcome(f)}${f.ran ? `; CPU ${e.cpu}; time ${e.time}` : ''}.`);
    if (sf.triage) lines.push(`  Likely cause: ${describeTriage(sf.triage)}.`);
    if (sf.suggestion) lines.push(`  Suggested change (in the pipeline file): ${describeSuggestion(sf.suggestion)}.`);
  }
  if (findings.trend) {
    const t = findings.trend;
    if (t.comparison) lines.push(`Trend: this run took ${t.comparison}.`);
    for (const step of t.steps) {
      if (step.resize) lines.push(`Resize ${step.step} (in the pipeline file): ${describeSuggestion(step.resize)}.`);
    }
  }
  return lines.join('\n');
}
