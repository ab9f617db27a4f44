import { readFileSync } from 'node:fs';
import { basename } from 'node:path';
import { z } from 'zod';
import { ConfigError } from '../errors.js';
import { parseSource, readYamlSource, SourceError, type YamlSource } from '../lib/yaml-source.js';
import { attemptPolicySchema, policyIssues } from '../requests/attempt-policy.js';
import { type JobSpec, jobSpecSchema } from '../sched/job-spec.js';
import { describeProblem, looksLikeSbatchScript, SbatchScriptError, sbatchSpec } from '../sched/sbatch-script.js';
import { unwrapSubmitBody } from '../sched/slurmrestd-body.js';

/** What a job file holds, and what kind of file it was. */
export interface JobFile {
  spec: JobSpec;
  retry?: Record<string, unknown>;
  kind: 'sbatch' | 'spec';
}

/**
 * A job file: an sbatch script whose `#SBATCH` lines carry the options (src/sched/sbatch-script.ts),
 * or a job spec in YAML or JSON with its retry policy under `retry:` (src/requests/attempt-policy.ts),
 * both checked here so a mistake is said with its line, not found by the daemon. Which it is, the
 * content says: a file that starts with `#!` or has `#SBATCH` lines is a script, whatever its name.
 * The policy goes to the daemon as written (the submit worker parses it again).
 */
export function readJobFile(file: string): JobFile {
  const text = readText(file);
  if (looksLikeSbatchScript(text)) return { spec: readSbatchScript(file, text), kind: 'sbatch' };
  const source = readYamlSource(file, text);
  const data = source.data;
  if (typeof data !== 'object' || data === null || Array.isArray(data) || !('retry' in data)) {
    return { spec: parseSpec(source, data), kind: 'spec' };
  }
  const { retry, ...specData } = data as Record<string, unknown>;
  const spec = parseSpec(source, specData);
  const policy = parseSource({ ...source, data: { retry } }, z.object({ retry: attemptPolicySchema })).retry;
  const issues = policyIssues(policy, spec);
  if (issues.length) throw new ConfigError(`${file}: ${issues.join('; ')}`);
  return { spec, retry: retry as Record<string, unknown>, kind: 'spec' };
}

function readText(file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new SourceError([`${file}: cannot read: ${code === 'ENOENT' ? 'no such file' : (error as Error).message}`]);
  }
}

/** As sbatch names a job after its script's file when no `--job-name` says otherwise. */
function readSbatchScript(file: string, text: string): JobSpec {
  try {
    return sbatchSpec(text, { defaultName: basename(file) });
  } catch (error) {
    if (!(error instanceof SbatchScriptError)) throw error;
    throw new SourceError(error.problems.map((problem) => describeProblem(problem, file)));
  }
}

/**
 * The spec, also when written as slurmrestd's submit body (`job:` around it, or a one-job `jobs:`
 * list): checked where it stands in the file, so a problem is said at its line.
 */
function parseSpec(source: YamlSource, data: unknown): JobSpec {
  const unwrapped = unwrapSubmitBody(data);
  if (unwrapped === data) return parseSource({ ...source, data }, jobSpecSchema);
  const wrapper = data as { job?: unknown };
  if (wrapper.job !== undefined) {
    return parseSource({ ...source, data: { job: unwrapped } }, z.object({ job: jobSpecSchema })).job;
  }
  return parseSource({ ...source, data: { jobs: [unwrapped] } }, z.object({ jobs: z.tuple([jobSpecSchema]) })).jobs[0];
}
