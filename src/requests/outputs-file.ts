import type { JobSpec } from '../sched/job-spec.js';

/**
 * Where a pipeline step writes its outputs (`name=value` lines, issue 36): the file named by
 * `$SCHEDFLOW_OUTPUTS` in its job's environment. A step that declares `outputs: { file }` has it
 * in its spec already (src/pipelines/run-plan.ts); any other step with an absolute working
 * directory gets `<working directory>/.schedflow-outputs-<request id>` when it is submitted: one
 * file per request, so a retry never reads what a failed attempt wrote. A step without a working
 * directory gets none: where its job runs is the scheduler's to say, and the daemon could not
 * find the file. The daemon reads the file after the step completed (src/pipelines/step-outputs.ts).
 */

export const OUTPUTS_ENV = 'SCHEDFLOW_OUTPUTS';

type SpecOf = Pick<JobSpec, 'environment' | 'current_working_directory'>;

/** The outputs file a request's job was (or will be) given; null when it has none. */
export function outputsFileOf(requestId: string, spec: SpecOf): string | null {
  const declared = spec.environment?.find((entry) => entry.startsWith(`${OUTPUTS_ENV}=`));
  if (declared !== undefined) return declared.slice(OUTPUTS_ENV.length + 1);
  const cwd = spec.current_working_directory;
  if (!cwd?.startsWith('/')) return null;
  return `${cwd.replace(/\/+$/, '')}/.schedflow-outputs-${requestId}`;
}

/** The spec as submitted: with `$SCHEDFLOW_OUTPUTS` in its environment when it has a file. */
export function withOutputsFile<T extends SpecOf>(requestId: string, spec: T): T {
  const file = outputsFileOf(requestId, spec);
  if (file === null || spec.environment?.some((entry) => entry.startsWith(`${OUTPUTS_ENV}=`))) return spec;
  // The codec adds a PATH to an environment without one (src/sched/codecs/common.ts).
  return { ...spec, environment: [...(spec.environment ?? []), `${OUTPUTS_ENV}=${file}`] };
}
