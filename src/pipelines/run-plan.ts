import type { z } from 'zod';
import type { AttemptPolicy, Deadlines, RunTrigger, StepNeed } from '../db/schema.js';
import { ConfigError } from '../errors.js';
import { policyIssues } from '../requests/attempt-policy.js';
import { OUTPUTS_ENV, outputsFileOf } from '../requests/outputs-file.js';
import { type JobSpec, jobSpecSchema } from '../sched/job-spec.js';
import {
  type OutputRef,
  outputRefOccurrences,
  outputRefsDeep,
  renderDeep,
  renderOutputsDeep,
  type TemplateContext,
  TemplateError,
  type UpstreamOutputs,
} from './param-substitution.js';
import type { LoadedPipeline, StepDeadlines } from './pipeline-file.js';
import { readScriptFile } from './script-file.js';

/** One step of a run as it will be submitted: templating applied, the spec final. */
export interface StepPlan {
  step: string;
  spec: JobSpec;
  needs: StepNeed[];
  /** Runs made before backoff and escalation existed hold `{ on, limit }` alone. */
  retry: AttemptPolicy | null;
  deadlines: Deadlines | null;
  summarize: boolean | null;
  /**
   * A step made only once the steps whose outputs it uses have ended (src/pipelines/deferred-steps.ts):
   * `template` is its spec with every `${steps.<step>.outputs.<name>}` still in it (`spec` is a
   * stand-in, checked with sample values); null for a step deferred only because a step it needs
   * is (its spec is final). Absent: made with the run.
   */
  deferred?: { template: Record<string, unknown> | null; uses: OutputRef[] };
}

/** What a run is, fixed when it is made: a reload of the file later does not change it. */
export interface RunPlan {
  profile: string;
  steps: StepPlan[];
  deadlines: Deadlines | null;
  webhookUrl: string | null;
  /** For a scheduled pipeline: its cron and zone, to tell when the next tick came without the run starting. */
  schedule: { cron: string; timezone: string } | null;
}

export interface PlanInput {
  runId: string;
  trigger: RunTrigger;
  createdAt: number;
  /** The cron time of a scheduled run. */
  scheduledFor: number | null;
  params: Record<string, string>;
  /** The run whose end started this one (the pipeline file's `on:`): `${upstream.…}` in its steps. */
  upstream?: UpstreamRun;
}

/** What a run started by another's end knows of that run. */
export interface UpstreamRun {
  runId: string;
  pipeline: string;
  /** How it ended: succeeded, failed or cancelled. */
  state: string;
  /** Its steps' outputs, by step and name (the newest attempt of each step that wrote any). */
  outputs: UpstreamOutputs;
}

/** Resolves a pipeline into the jobs of one run. Bad parameters or a spec the templating broke: ConfigError. */
export function planRun(pipeline: LoadedPipeline, input: PlanInput): RunPlan {
  const { def } = pipeline;
  const params = resolveParams(def.params, input.params);
  const base = input.scheduledFor ?? input.createdAt;
  const timezone = def.schedule?.timezone ?? 'UTC';
  const runContext = {
    run: {
      id: input.runId,
      scheduled_time: new Date(base).toISOString(),
      date: new Intl.DateTimeFormat('en-CA', { timeZone: timezone, dateStyle: 'short' }).format(base),
      trigger: input.trigger,
    },
    pipeline: { name: pipeline.name },
    params,
    ...(input.upstream && {
      upstream: { run_id: input.upstream.runId, pipeline: input.upstream.pipeline, state: input.upstream.state },
    }),
  };
  const deferredSteps = new Set<string>();
  const steps = pipeline.order.map((step): StepPlan => {
    const s = def.steps[step];
    if (!s) throw new Error(`no step ${step}`);
    const context: TemplateContext = { ...runContext, step: { name: step } };
    const script = s.script ?? readScript(step, pipeline.file, s.script_file as string);
    const raw = {
      ...s.slurm,
      name: s.name ?? `${pipeline.name}.${step}`,
      script,
      partition: s.partition ?? def.defaults.partition,
      account: s.account ?? def.defaults.account,
      environment: mergeEnvironment(def.defaults.environment, s.environment),
      current_working_directory: s.current_working_directory ?? def.defaults.current_working_directory,
      tasks: s.tasks,
      cpus_per_task: s.cpus_per_task,
      memory_per_node: s.memory_per_node,
      time_limit: s.time_limit ?? def.defaults.time_limit,
      array: s.array,
      comment: s.comment,
      standard_output: s.standard_output,
      standard_error: s.standard_error,
      on_pending: s.on_pending,
    };
    const needs = pipeline.needs[step] ?? [];
    const template = withOutputsFile(step, rendered(step, raw, context, input.upstream?.outputs), s.outputs?.file);
    // schedflow names the outputs file: a value pasted in whole as an environment entry must not.
    if (
      !s.outputs?.file &&
      (template.environment as string[] | undefined)?.some((e) => e.startsWith(`${OUTPUTS_ENV}=`))
    ) {
      throw new ConfigError(
        `steps.${step}.environment: a parameter's or upstream output's value sets ${OUTPUTS_ENV}, which schedflow sets (name the step's own file with outputs: { file })`,
      );
    }
    // The outputs a step uses are those written in the file, found before parameters go in: a
    // parameter's (or an upstream output's) value is text, and one that spells `${steps.…}` must not
    // make the step wait on a step it never named (one that may not exist: the run would wait forever).
    const uses = outputRefsDeep(raw);
    if (outputRefOccurrences(template) !== outputRefOccurrences(raw)) {
      throw new ConfigError(
        `steps.${step}: a parameter's or upstream output's value holds \${steps.<step>.outputs.<name>}: step outputs are used only where the pipeline file writes them, values are plain text`,
      );
    }
    // A step behind a deferred one is deferred too: it has nothing to depend on until that one is made.
    const deferred =
      uses.length > 0
        ? { template, uses }
        : needs.some((n) => deferredSteps.has(n.step))
          ? { template: null, uses: [] }
          : undefined;
    if (deferred) deferredSteps.add(step);
    // A deferred step's spec is checked now with a stand-in for each output (1: a count of one task).
    const spec = parseSpec(step, uses.length > 0 ? renderOutputsDeep(template, () => '1') : template);
    return {
      step,
      spec,
      needs,
      ...(deferred && { deferred }),
      retry: retryOf(step, s.retry, spec),
      // The run's max_pending bounds each step's wait (a step's own wins); start_by and
      // finish_by are about the run as a whole and stay with it.
      deadlines: absolute({ max_pending: def.deadlines?.max_pending, ...s.deadlines }, base),
      summarize: s.summarize ?? def.summarize ?? null,
    };
  });
  // A step whose outputs are used must be a step upstream of the user (ended when it is made; the
  // loader checks this too, for the file as written), given a file the daemon can find: in its
  // working directory.
  const byName = new Map(steps.map((s) => [s.step, s]));
  for (const s of steps) {
    for (const ref of s.deferred?.uses ?? []) {
      const producer = byName.get(ref.step);
      if (!producer || !upstreamOf(s.step, pipeline.needs).has(ref.step)) {
        throw new ConfigError(
          `steps.${s.step}: uses \${steps.${ref.step}.outputs.${ref.name}}, and ${producer ? `step "${ref.step}" is not upstream of it (add it to needs)` : `there is no step "${ref.step}"`}`,
        );
      }
      if (outputsFileOf(input.runId, producer.spec) === null) {
        throw new ConfigError(
          `steps.${s.step}: uses \${steps.${ref.step}.outputs.${ref.name}}, and step "${ref.step}" has no absolute current_working_directory (its own or the defaults'): its outputs file ($SCHEDFLOW_OUTPUTS) is put there`,
        );
      }
    }
  }
  return {
    profile: pipeline.profile,
    steps,
    deadlines: absolute(def.deadlines, base),
    webhookUrl: def.webhook ?? null,
    schedule: def.schedule ? { cron: def.schedule.cron, timezone } : null,
  };
}

/** The steps a step needs, directly or through the steps it needs. */
function upstreamOf(step: string, needs: Readonly<Record<string, readonly StepNeed[]>>): Set<string> {
  const seen = new Set<string>();
  const next = [step];
  for (let current = next.pop(); current !== undefined; current = next.pop()) {
    for (const need of needs[current] ?? []) {
      if (seen.has(need.step)) continue;
      seen.add(need.step);
      next.push(need.step);
    }
  }
  return seen;
}

function resolveParams(
  declared: Record<string, string | number | null>,
  given: Record<string, string>,
): Record<string, string> {
  const names = Object.keys(declared);
  for (const name of Object.keys(given)) {
    if (!(name in declared)) {
      throw new ConfigError(
        `unknown parameter "${name}"; this pipeline takes ${names.length ? names.join(', ') : 'no parameters'}`,
      );
    }
  }
  const params: Record<string, string> = {};
  for (const [name, fallback] of Object.entries(declared)) {
    const value = given[name] ?? (fallback === null ? undefined : String(fallback));
    if (value === undefined) throw new ConfigError(`parameter "${name}" is required (it has no default)`);
    params[name] = value;
  }
  return params;
}

function mergeEnvironment(base: string[] | undefined, own: string[] | undefined): string[] | undefined {
  if (!base && !own) return undefined;
  const merged = new Map<string, string>();
  for (const entry of [...(base ?? []), ...(own ?? [])]) merged.set(entry.slice(0, entry.indexOf('=')), entry);
  return [...merged.values()];
}

/** A declared outputs file, in the job's environment as `$SCHEDFLOW_OUTPUTS` (src/requests/outputs-file.ts). */
function withOutputsFile(
  step: string,
  raw: Record<string, unknown> & { environment?: string[] | undefined; current_working_directory?: string | undefined },
  file: string | undefined,
): Record<string, unknown> {
  if (file === undefined) return raw;
  const cwd = raw.current_working_directory;
  if (!cwd?.startsWith('/')) {
    throw new ConfigError(
      `steps.${step}.outputs.file: relative to the working directory, and the step has none that is absolute (current_working_directory)`,
    );
  }
  const path = `${cwd.replace(/\/+$/, '')}/${file}`;
  const environment = (raw.environment ?? []).filter((e) => !e.startsWith(`${OUTPUTS_ENV}=`));
  return { ...raw, environment: [...environment, `${OUTPUTS_ENV}=${path}`] };
}

function readScript(step: string, pipelineFile: string, scriptFile: string): string {
  try {
    return readScriptFile(pipelineFile, scriptFile);
  } catch (error) {
    if (error instanceof ConfigError) throw new ConfigError(`steps.${step}.script_file: ${error.message}`);
    throw error;
  }
}

function rendered<T>(step: string, value: T, context: TemplateContext, upstreamOutputs?: UpstreamOutputs): T {
  try {
    return renderDeep(value, context, upstreamOutputs);
  } catch (error) {
    if (error instanceof TemplateError) throw new ConfigError(`steps.${step}: ${error.message}`);
    throw error;
  }
}

function parseSpec(step: string, raw: Record<string, unknown>): JobSpec {
  const defined = Object.fromEntries(Object.entries(raw).filter(([, v]) => v !== undefined));
  const parsed = jobSpecSchema.safeParse(defined);
  if (parsed.success) return parsed.data;
  throw new ConfigError(
    parsed.error.issues.map((i: z.core.$ZodIssue) => `steps.${step}.${i.path.join('.')}: ${i.message}`).join('; '),
  );
}

/** The step's policy, if it can do what it says with the step's spec (memory to grow, under its bound). */
function retryOf(step: string, policy: AttemptPolicy | undefined, spec: JobSpec): AttemptPolicy | null {
  if (!policy) return null;
  const issues = policyIssues(policy, spec);
  if (issues.length) throw new ConfigError(issues.map((issue) => `steps.${step}.${issue}`).join('; '));
  return policy;
}

function absolute(deadlines: StepDeadlines | undefined, base: number): Deadlines | null {
  if (!deadlines) return null;
  const out: Deadlines = {};
  if (deadlines.max_pending !== undefined) out.maxPendingSec = deadlines.max_pending;
  if (deadlines.start_by !== undefined) out.startBy = base + deadlines.start_by * 1000;
  if (deadlines.finish_by !== undefined) out.finishBy = base + deadlines.finish_by * 1000;
  return Object.keys(out).length ? out : null;
}
