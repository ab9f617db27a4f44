/**
 * slurmrestd's submit body (`job_submit_req`: `{"script": …, "job": {…}}`, or `"jobs": [{…}]`) where
 * a job spec is expected: a Slurm user's body for slurmrestd works as a schedflow spec as it is. The
 * job's members become the spec; a top-level `script` (the older place for it) fills the job's when
 * it has none. A heterogeneous job (`jobs` with more than one) is left as it is, for the spec's check
 * to refuse with what to write instead (src/sched/job-spec.ts).
 */
export function unwrapSubmitBody(data: unknown): unknown {
  if (!isPlainObject(data)) return data;
  const keys = Object.keys(data);
  if (!keys.every((key) => key === 'job' || key === 'jobs' || key === 'script')) return data;
  const { job, jobs, script } = data;
  let inner: unknown;
  if (job !== undefined && jobs === undefined) inner = job;
  else if (job === undefined && Array.isArray(jobs) && jobs.length === 1) inner = jobs[0];
  if (!isPlainObject(inner)) return data;
  return script !== undefined && inner.script === undefined ? { ...inner, script } : inner;
}

function isPlainObject(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
