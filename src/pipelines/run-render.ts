import type { StepNeed } from '../db/schema.js';
import { ConfigError } from '../errors.js';
import { withOutputsFile } from '../requests/outputs-file.js';
import { codecFor, type JobCodec } from '../sched/codecs/codec.js';
import type { JobSpec } from '../sched/job-spec.js';
import type { Profile } from '../sched/profile.js';
import { validateAgainstSpec } from '../sched/spec-validator.js';
import { type ApiVersion, isApiVersion, LATEST_VERSION } from '../sched/versions.js';
import { isOneOutputRef, outputRefOccurrences, stringsIn } from './param-substitution.js';
import type { LoadedPipeline, RunEnd } from './pipeline-file.js';
import { type Placeholder, placeholdersIn } from './placeholder-kinds.js';
import { planRun, type StepPlan, type UpstreamRun } from './run-plan.js';
import { readScriptFile } from './script-file.js';
import { upstreamsOf } from './upstream-links.js';

/**
 * What `schedflow validate --render` shows of a run (issue 36): for every step, when it is
 * submitted, which of its placeholders resolve when, and the submit body. A step made with the
 * run gets its exact body, as the client would send it: the profile's account and partition
 * filled in, the request marker, `$SCHEDFLOW_OUTPUTS` in its environment, and the dependencies
 * on the needed steps' jobs (request and job ids exist only at submit time: `<request id>`,
 * `<step>`). A step that uses other steps' outputs is made
 * only once they have ended (src/pipelines/deferred-steps.ts): its body shows those placeholders
 * as written, and the body checked against the API version's schema is the plan's stand-in,
 * each output `1`.
 *
 * The JSON of `--render` is this object; CI scripts read it, so fields are added, never renamed.
 */

/**
 * - `with-run`: submitted when the run is made, its needs as Slurm dependencies;
 * - `after-outputs`: made once the steps in `after` have ended (it uses their outputs), and the
 *   deferred steps it needs (`behind`) have been made;
 * - `behind-deferred`: uses no outputs, but needs a deferred step (`behind`), whose job it can
 *   depend on only once that step is made.
 */
export type SubmittedAt = 'with-run' | 'after-outputs' | 'behind-deferred';

export interface StepSubmission {
  at: SubmittedAt;
  /** Steps whose end it waits for, as it uses their outputs. */
  after: string[];
  /** The outputs it waits for: `steps.split.outputs.chunks`. */
  waitsFor: string[];
  /** Deferred steps it needs: it is made once they are. */
  behind: string[];
  /** The Slurm dependency it is submitted with (job ids as `<step>`); null: none. */
  dependency: string | null;
}

export interface RenderedPlaceholder extends Placeholder {
  /** A parameter's value in this render; null for the others (values of a run not made). */
  value: string | null;
  /** Where the step has it: `script`, `environment`, `defaults.current_working_directory`, `script_file x.sh`. */
  in: string[];
}

export interface RenderedStep {
  step: string;
  needs: StepNeed[];
  /** The submit body; for an `after-outputs` step, with the step outputs as written. */
  body: { job: Record<string, unknown> };
  submitted: StepSubmission;
  /** The step's placeholders as the pipeline file writes them, in the order written. */
  placeholders: RenderedPlaceholder[];
  /** `array: ${steps.<step>.outputs.<name>}`: sized when that step has ended; null otherwise. */
  arraySizedBy: { placeholder: string; step: string } | null;
  /** The value each step output had in the body checked against the schema; null: `body` itself was. */
  standIn: string | null;
}

export interface RunRender {
  pipeline: string;
  profile: string | null;
  version: ApiVersion;
  /** The parameters of this render: defaults, or as given. */
  params: Record<string, string>;
  /** How its runs are started besides a trigger: its schedule, the ends of other pipelines' runs (`on:`). */
  started: { schedule: string | null; on: { end: RunEnd; pipeline: string }[] };
  steps: RenderedStep[];
}

/** The value a plan checks a deferred step's spec with (src/pipelines/run-plan.ts). */
const STAND_IN = '1';

/** Step fields a run does not render (src/pipelines/run-plan.ts): their placeholders would mislead. */
const NOT_RENDERED = new Set(['needs', 'retry', 'deadlines', 'summarize', 'outputs', 'script', 'script_file']);
/** The defaults a step takes when it has no value of its own (`profile` is no job's field). */
const INHERITED = ['partition', 'account', 'time_limit', 'current_working_directory'] as const;

/** Bad parameters, or a body the version does not take: ConfigError. */
export function renderRun(
  pipeline: LoadedPipeline,
  profile: Profile | undefined,
  given: Record<string, string>,
): RunRender {
  const version = profile && isApiVersion(profile.version) ? profile.version : LATEST_VERSION;
  // A pipeline that follows others is rendered as an upstream end starts it: its upstream
  // values shown by name, as the run id is.
  const plan = planRun(pipeline, {
    runId: '<run id>',
    trigger: pipeline.def.on ? 'upstream' : 'cli',
    createdAt: Date.now(),
    scheduledFor: null,
    params: given,
    ...(pipeline.def.on && { upstream: upstreamStandIns(pipeline) }),
  });
  // planRun has refused unknown and missing ones: each has a value.
  const params = Object.fromEntries(
    Object.entries(pipeline.def.params).map(([name, fallback]) => [name, given[name] ?? String(fallback)]),
  );
  const codec = codecFor(version);
  const deferred = new Set(plan.steps.filter((s) => s.deferred).map((s) => s.step));
  const steps = plan.steps.map((step): RenderedStep => {
    const submitted = submissionOf(step, deferred);
    const toSend = (spec: JobSpec) =>
      encode(codec, pipeline, step.step, {
        // As the submitter gives a run's step its outputs file (src/requests/submitter.ts).
        ...withOutputsFile('<request id>', spec),
        account: spec.account ?? profile?.account,
        partition: spec.partition ?? profile?.partition,
        comment: spec.comment ? `schedflow:<request id> ${spec.comment}` : 'schedflow:<request id>',
        ...(submitted.dependency && { dependency: submitted.dependency }),
      });
    const checked = toSend(step.spec);
    const check = validateAgainstSpec(version, 'job_submit_req', checked);
    if (!check.ok) {
      throw new ConfigError(
        `${pipeline.file}: step ${step.step}: the submit body is not valid for ${version}: ${check.errors.join('; ')}`,
      );
    }
    const template = step.deferred?.template ?? null;
    const written = pipeline.def.steps[step.step]?.array;
    const sizedBy = typeof written === 'string' && isOneOutputRef(written) ? placeholdersIn(written)[0] : undefined;
    return {
      step: step.step,
      needs: step.needs,
      body: template ? toSend(asWritten(step.spec, template)) : checked,
      submitted,
      placeholders: placeholdersOf(pipeline, step.step, params),
      arraySizedBy: sizedBy?.step ? { placeholder: sizedBy.written, step: sizedBy.step } : null,
      standIn: template ? STAND_IN : null,
    };
  });
  const schedule = pipeline.def.schedule;
  return {
    pipeline: pipeline.name,
    profile: pipeline.profile || null,
    version,
    params,
    started: {
      schedule: schedule ? `cron "${schedule.cron}" (${schedule.timezone})${schedule.enabled ? '' : ', paused'}` : null,
      on: upstreamsOf(pipeline).map(([end, upstream]) => ({ end, pipeline: upstream })),
    },
    steps,
  };
}

/** The upstream run's values by name (`<upstream.outputs.split.chunks>`): known only when an upstream run ends. */
function upstreamStandIns(pipeline: LoadedPipeline): UpstreamRun {
  const outputs: Record<string, Record<string, string>> = {};
  for (const { step, name } of pipeline.upstreamRefs) {
    outputs[step] = { ...outputs[step], [name]: `<upstream.outputs.${step}.${name}>` };
  }
  return { runId: '<upstream run id>', pipeline: '<upstream pipeline>', state: '<upstream state>', outputs };
}

function submissionOf(step: StepPlan, deferred: ReadonlySet<string>): StepSubmission {
  const behind = step.needs.filter((n) => deferred.has(n.step)).map((n) => n.step);
  const uses = step.deferred?.uses ?? [];
  const after = [...new Set(uses.map((ref) => ref.step))];
  // The steps whose outputs it uses have ended when it is made: schedflow decides those needs
  // itself (src/pipelines/step-dependencies.ts), Slurm is given the others.
  const dependency = step.needs
    .filter((n) => !after.includes(n.step))
    .map((n) => `${n.type}:<${n.step}>`)
    .join(',');
  return {
    at: !step.deferred ? 'with-run' : uses.length > 0 ? 'after-outputs' : 'behind-deferred',
    after,
    waitsFor: uses.map((ref) => `steps.${ref.step}.outputs.${ref.name}`),
    behind,
    dependency: dependency || null,
  };
}

/**
 * A deferred step's spec with its step outputs as written: the fields of its template that hold
 * one in place of the stand-in's. They are text fields (or `slurm:` members, passed through), so
 * the codec sends them as they are.
 */
function asWritten(standIn: JobSpec, template: Record<string, unknown>): JobSpec {
  const withOutputs = Object.entries(template).filter(([, value]) => outputRefOccurrences(value) > 0);
  // Not parsed: a placeholder is no array expression; what the scheduler gets is checked above.
  return { ...standIn, ...Object.fromEntries(withOutputs) } as JobSpec;
}

function encode(codec: JobCodec, pipeline: LoadedPipeline, step: string, spec: JobSpec) {
  try {
    return codec.encodeSubmit(spec);
  } catch (error) {
    // A `slurm:` member the version does not know.
    throw new ConfigError(`${pipeline.file}: step ${step}: ${(error as Error).message}`);
  }
}

/** The placeholders of a step as its file writes them: its fields, the defaults it takes, its script. */
function placeholdersOf(
  pipeline: LoadedPipeline,
  step: string,
  params: Readonly<Record<string, string>>,
): RenderedPlaceholder[] {
  const found = new Map<string, RenderedPlaceholder>();
  for (const [text, where] of writtenTexts(pipeline, step)) {
    for (const placeholder of placeholdersIn(text)) {
      const seen = found.get(placeholder.written);
      if (seen) {
        if (!seen.in.includes(where)) seen.in.push(where);
        continue;
      }
      const param = placeholder.kind === 'param' ? params[placeholder.name.slice('params.'.length)] : undefined;
      found.set(placeholder.written, { ...placeholder, value: param ?? null, in: [where] });
    }
  }
  return [...found.values()];
}

/** The texts a run renders for a step (src/pipelines/run-plan.ts), each with where it is written. */
function writtenTexts(pipeline: LoadedPipeline, step: string): [string, string][] {
  const { def } = pipeline;
  const own = def.steps[step];
  if (!own) return [];
  const texts: [string, string][] = [];
  const add = (value: unknown, prefix: string[]) => {
    for (const [text, path] of stringsIn(value, prefix)) {
      // `environment.0` is the environment; `slurm.nodes` names the member.
      texts.push([text, path.filter((p) => typeof p === 'string').join('.')]);
    }
  };
  if (own.script !== undefined) add(own.script, ['script']);
  // Read when a run is made, as planRun just has: it is there.
  else if (own.script_file !== undefined)
    texts.push([readScriptFile(pipeline.file, own.script_file), `script_file ${own.script_file}`]);
  for (const [key, value] of Object.entries(own)) if (!NOT_RENDERED.has(key)) add(value, [key]);
  for (const key of INHERITED) if (own[key] === undefined) add(def.defaults[key], ['defaults', key]);
  // The defaults' variables that the step does not set itself.
  const ownNames = new Set((own.environment ?? []).map((e) => e.slice(0, e.indexOf('='))));
  add(
    (def.defaults.environment ?? []).filter((e) => !ownNames.has(e.slice(0, e.indexOf('=')))),
    ['defaults', 'environment'],
  );
  return texts;
}
