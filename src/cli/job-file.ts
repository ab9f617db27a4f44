import { z } from 'zod';
import { ConfigError } from '../errors.js';
import { parseSource, readYamlSource } from '../lib/yaml-source.js';
import { attemptPolicySchema, policyIssues } from '../requests/attempt-policy.js';
import { type JobSpec, jobSpecSchema } from '../sched/job-spec.js';

/**
 * A job file: a job spec, and its retry policy under `retry:` (src/requests/attempt-policy.ts),
 * both checked here so a mistake is said with its line, not found by the daemon. The policy goes
 * to the daemon as written (the submit worker parses it again).
 */
export function readJobFile(file: string): { spec: JobSpec; retry?: Record<string, unknown> } {
  const source = readYamlSource(file);
  const data = source.data;
  if (typeof data !== 'object' || data === null || Array.isArray(data) || !('retry' in data)) {
    return { spec: parseSource(source, jobSpecSchema) };
  }
  const { retry, ...specData } = data as Record<string, unknown>;
  const spec = parseSource({ ...source, data: specData }, jobSpecSchema);
  const policy = parseSource({ ...source, data: { retry } }, z.object({ retry: attemptPolicySchema })).retry;
  const issues = policyIssues(policy, spec);
  if (issues.length) throw new ConfigError(`${file}: ${issues.join('; ')}`);
  return { spec, retry: retry as Record<string, unknown> };
}
