import { createHash } from 'node:crypto';
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { basename, dirname, extname, join, resolve } from 'node:path';
import type { StepNeed } from '../db/schema.js';
import { locate, parseSource, readYamlSource, SourceError, type YamlSource } from '../lib/yaml-source.js';
import { ArraySyntaxError, DEFAULT_MAX_ARRAY_SIZE, parseArrayExpression } from '../sched/job-array.js';
import type { Profile } from '../sched/profile.js';
import { scopesApply } from '../sched/scope-check.js';
import {
  malformedOutputRefs,
  malformedUpstreamRefs,
  type OutputRef,
  outputRefs,
  stringsIn,
  UPSTREAM_VARIABLES,
  unknownPlaceholders,
  upstreamOutputRefs,
  usesUpstream,
} from './param-substitution.js';
import { type LoadedPipeline, type PipelineFile, pipelineFileSchema } from './pipeline-file.js';
import { MAX_PIPELINE_FILE_BYTES, MAX_PIPELINE_STEPS } from './pipeline-limits.js';
import { planRun, type UpstreamRun } from './run-plan.js';
import { readScriptFile } from './script-file.js';
import { stepOrder } from './step-order.js';

// Beside the file format, not here: run-plan.ts plans from it and this file checks by planning.
export type { LoadedPipeline } from './pipeline-file.js';

export interface LoadContext {
  profiles: ReadonlyMap<string, Profile>;
  /** Used when a file names no profile. */
  defaultProfile?: string;
}

export const PIPELINE_EXTENSIONS = ['.yaml', '.yml', '.json'];

/** The pipeline files of a folder, sorted; a missing folder has none. */
export function pipelineFiles(dir: string): string[] {
  let names: string[];
  try {
    names = readdirSync(dir);
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return [];
    throw error;
  }
  return names
    .filter((n) => PIPELINE_EXTENSIONS.includes(extname(n)) && !n.startsWith('.'))
    .sort()
    .map((n) => join(dir, n));
}

/**
 * Reads and checks one pipeline file. Every problem is reported as
 * `file:line:column: field: what is wrong`, all at once (SourceError).
 */
export function loadPipelineFile(file: string, context: LoadContext): LoadedPipeline {
  const path = resolve(file);
  const text = readText(path);
  const source = readYamlSource(path, text);
  checkStepCount(source);
  const def = parseSource(source, pipelineFileSchema);
  const problems: string[] = [];
  const at = (where: PropertyKey[], message: string) => problems.push(`${locate(source, where)}: ${message}`);

  const name = def.name ?? basename(path, extname(path));
  const profile = checkProfile(def, context, at);
  checkAccounts(def, profile, context, at);
  checkArrays(def, profile, context, at);
  const needs = checkNeeds(def, at);
  for (const [param, value] of Object.entries(def.params)) {
    if (value !== null) continue;
    if (def.schedule?.enabled) {
      at(['params', param], `params.${param}: scheduled runs are made without parameters: give it a default`);
    } else if (def.on) {
      at(
        ['params', param],
        `params.${param}: runs started by an upstream run (on:) are made without parameters: give it a default`,
      );
    }
  }
  const order = problems.length === 0 ? topologicalOrder(def, needs, at) : [];
  checkPlaceholders(source, def, path, at);
  checkOutputRefs(source, def, path, needs, at);
  const upstreamRefs = checkUpstreamRefs(source, def, path, at);
  if (problems.length > 0) throw new SourceError(problems);

  const loaded: LoadedPipeline = {
    name,
    file: path,
    def,
    profile: profile ?? '',
    order,
    needs,
    hash: createHash('sha256').update(text).digest('hex'),
    upstreamRefs,
  };
  // A dry run with sample values catches what only a rendered job spec shows (a script without #!).
  try {
    planRun(loaded, {
      runId: 'check',
      trigger: def.on ? 'upstream' : 'cli',
      createdAt: 0,
      scheduledFor: null,
      params: sampleParams(def),
      ...(def.on && { upstream: sampleUpstream(upstreamRefs) }),
    });
  } catch (error) {
    throw new SourceError([`${locate(source, ['steps'])}: ${(error as Error).message}`]);
  }
  return loaded;
}

function readText(path: string): string {
  try {
    // Sized before it is read: the limit is there so a huge file costs nothing.
    const { size } = statSync(path);
    if (size > MAX_PIPELINE_FILE_BYTES) {
      throw new SourceError([
        `${path}: ${size} bytes, more than the ${MAX_PIPELINE_FILE_BYTES} bytes (${MAX_PIPELINE_FILE_BYTES / 1024 / 1024} MiB) a pipeline file may have: split it into several pipelines`,
      ]);
    }
    return readFileSync(path, 'utf8');
  } catch (error) {
    if (error instanceof SourceError) throw error;
    const code = (error as NodeJS.ErrnoException).code;
    throw new SourceError([`${path}: cannot read: ${code === 'ENOENT' ? 'no such file' : (error as Error).message}`]);
  }
}

/** Before the schema check, which would otherwise check every one of a huge number of steps first. */
function checkStepCount(source: YamlSource): void {
  const steps = (source.data as { steps?: unknown } | null)?.steps;
  if (steps === null || typeof steps !== 'object') return;
  const count = Object.keys(steps).length;
  if (count > MAX_PIPELINE_STEPS) {
    throw new SourceError([
      `${locate(source, ['steps'])}: steps: ${count} steps, more than the ${MAX_PIPELINE_STEPS} a pipeline may have: split it into several pipelines, or use array jobs (array:) for many alike tasks`,
    ]);
  }
}

type At = (where: PropertyKey[], message: string) => void;

function checkProfile(def: PipelineFile, context: LoadContext, at: At): string | null {
  const wanted = def.defaults.profile ?? context.defaultProfile ?? null;
  if (wanted === null) return null;
  if (context.profiles.size > 0 && !context.profiles.has(wanted)) {
    const known = [...context.profiles.keys()].join(', ');
    at(['defaults', 'profile'], `defaults.profile: no scheduler profile "${wanted}" (configured: ${known})`);
    return null;
  }
  return wanted;
}

/**
 * The proxy refuses a bearer token's submission to another account (403): say so before a run
 * fails. On plain slurmrestd the profile's account is a default, and the user's associations
 * decide, once they are known (at run creation: src/requests/door.ts).
 */
function checkAccounts(def: PipelineFile, profileName: string | null, context: LoadContext, at: At): void {
  const profile = profileName ? context.profiles.get(profileName) : undefined;
  const bound = profile && scopesApply(profile) ? profile.account : undefined;
  if (!bound) return;
  const explain = (account: string) =>
    `account "${account}" differs from the account "${bound}" that profile "${profileName}"'s token is bound to; the scheduler would refuse the submission (403): use "${bound}" or leave account out`;
  if (def.defaults.account && def.defaults.account !== bound) {
    at(['defaults', 'account'], `defaults.account: ${explain(def.defaults.account)}`);
  }
  for (const [step, s] of Object.entries(def.steps)) {
    if (s.account && s.account !== bound)
      at(['steps', step, 'account'], `steps.${step}.account: ${explain(s.account)}`);
  }
}

/**
 * An array step past the profile's `maxArraySize` would be refused at the door at every run
 * (src/requests/door.ts): said when the file is loaded or validated. An expression that takes
 * a parameter is left to the door, which reads it once substituted.
 */
function checkArrays(def: PipelineFile, profileName: string | null, context: LoadContext, at: At): void {
  const profile = profileName ? context.profiles.get(profileName) : undefined;
  const limit = profile?.maxArraySize ?? DEFAULT_MAX_ARRAY_SIZE;
  const check = (array: unknown, where: PropertyKey[]) => {
    if (typeof array !== 'string' || array.includes('${')) return;
    let maxIndex: number;
    try {
      maxIndex = parseArrayExpression(array).maxIndex;
    } catch (error) {
      if (error instanceof ArraySyntaxError) return;
      throw error;
    }
    if (maxIndex >= limit) {
      at(
        where,
        `${where.join('.')}: index ${maxIndex} is past the profile's maxArraySize ${limit} (the cluster's MaxArraySize: indexes 0 to ${limit - 1}); Slurm would refuse the array (2081): use indexes below ${limit}`,
      );
    }
  };
  check((def.defaults as { array?: unknown }).array, ['defaults', 'array']);
  for (const [step, s] of Object.entries(def.steps)) check((s as { array?: unknown }).array, ['steps', step, 'array']);
}

function checkNeeds(def: PipelineFile, at: At): Record<string, StepNeed[]> {
  const needs: Record<string, StepNeed[]> = {};
  // Once, not per missing need: a file with many wrong needs would repeat the whole list each time.
  const names = listed(Object.keys(def.steps));
  for (const [step, s] of Object.entries(def.steps)) {
    needs[step] = s.needs.map((n, i) => {
      const need: StepNeed = typeof n === 'string' ? { step: n, type: 'afterok' } : n;
      const where = ['steps', step, 'needs', i];
      if (need.step === step) at(where, `steps.${step}.needs: a step cannot need itself`);
      else if (!Object.hasOwn(def.steps, need.step)) {
        at(where, `steps.${step}.needs: no step "${need.step}" (steps: ${names})`);
      }
      return need;
    });
  }
  return needs;
}

function topologicalOrder(def: PipelineFile, needs: Record<string, StepNeed[]>, at: At): string[] {
  const result = stepOrder(Object.keys(def.steps), needs);
  if (result.ok) return result.order;
  at(['steps'], `steps: the needs of ${listed(result.cycle)} form a cycle`);
  return [];
}

/** Step names for a message, the first few of a long list. */
function listed(names: readonly string[], shown = 20): string {
  const head = names.slice(0, shown).join(', ');
  return names.length > shown ? `${head} and ${names.length - shown} more` : head;
}

function checkPlaceholders(source: YamlSource, def: PipelineFile, path: string, at: At): void {
  const params = new Set(Object.keys(def.params));
  const upstream = def.on !== undefined;
  const raw = source.data as Record<string, unknown>;
  for (const section of ['defaults', 'steps'] as const) {
    for (const [text, where] of stringsIn(raw[section], [section])) {
      for (const name of unknownPlaceholders(text, params, upstream)) {
        at(where, `${where.join('.')}: ${unknownName(name, upstream)} (${describeNames(params, upstream)})`);
      }
    }
  }
  for (const [step, s] of Object.entries(def.steps)) {
    if (!s.script_file) continue;
    const scriptPath = resolve(dirname(path), s.script_file);
    let text: string;
    try {
      text = readScriptFile(path, s.script_file);
    } catch (error) {
      at(['steps', step, 'script_file'], `steps.${step}.script_file: ${(error as Error).message}`);
      continue;
    }
    for (const name of unknownPlaceholders(text, params, upstream)) {
      at(
        ['steps', step, 'script_file'],
        `${scriptPath}: ${unknownName(name, upstream)} (${describeNames(params, upstream)})`,
      );
    }
  }
}

/**
 * `${steps.<step>.outputs.<name>}`: written as one, naming a step that runs before this one (one
 * it needs, directly or through others: only then has it ended when this one is made), and not
 * in `defaults` (a value of one step is not every step's).
 */
function checkOutputRefs(
  source: YamlSource,
  def: PipelineFile,
  path: string,
  needs: Record<string, StepNeed[]>,
  at: At,
): void {
  const raw = source.data as Record<string, unknown>;
  for (const [text, where] of stringsIn(raw.defaults, ['defaults'])) {
    if (outputRefs(text).length > 0) {
      at(where, `${where.join('.')}: step outputs are used in a step, not in defaults`);
    }
  }
  const steps = (raw.steps ?? {}) as Record<string, unknown>;
  for (const step of Object.keys(def.steps)) {
    const upstream = ancestorsOf(step, needs);
    const texts = [...stringsIn(steps[step], ['steps', step])];
    const scriptFile = def.steps[step]?.script_file;
    if (scriptFile) {
      try {
        texts.push([readScriptFile(path, scriptFile), ['steps', step, 'script_file']]);
      } catch {
        // Said by checkPlaceholders.
      }
    }
    for (const [text, where] of texts) {
      for (const bad of malformedOutputRefs(text)) {
        at(
          where,
          `${where.join('.')}: ${bad} is not a step output: write \${steps.<step>.outputs.<name>} (:q to shell-quote it)`,
        );
      }
      for (const ref of outputRefs(text)) {
        const written = `\${steps.${ref.step}.outputs.${ref.name}}`;
        if (!Object.hasOwn(def.steps, ref.step)) {
          at(where, `${where.join('.')}: ${written}: no step "${ref.step}" (steps: ${listed(Object.keys(def.steps))})`);
        } else if (!upstream.has(ref.step)) {
          at(
            where,
            `${where.join('.')}: ${written}: step "${ref.step}" is not upstream of "${step}": add it to needs (directly or through a step it needs), so that it has ended when "${step}" is made`,
          );
        }
      }
    }
  }
}

/** The steps a step waits for, directly or through others. */
function ancestorsOf(step: string, needs: Record<string, StepNeed[]>): Set<string> {
  // Own keys only: a need may name a step that does not exist (said by checkNeeds), `toString` say.
  const needsOf = (name: string) => (Object.hasOwn(needs, name) ? (needs[name] ?? []) : []).map((n) => n.step);
  const seen = new Set<string>();
  const todo = needsOf(step);
  while (todo.length > 0) {
    const next = todo.pop() as string;
    if (seen.has(next)) continue;
    seen.add(next);
    todo.push(...needsOf(next));
  }
  return seen;
}

function unknownName(name: string, upstream: boolean): string {
  if (!upstream && name.startsWith('upstream.')) {
    return `\${${name}}: only a pipeline started by other pipelines' runs (on:) has an upstream run`;
  }
  return `unknown template name \${${name}}`;
}

function describeNames(params: ReadonlySet<string>, upstream: boolean): string {
  const declared = params.size ? [...params].map((p) => `params.${p}`).join(', ') : 'no params declared';
  const fromUpstream = upstream
    ? `, ${UPSTREAM_VARIABLES.map((n) => `upstream.${n}`).join(', ')}, upstream.outputs.<step>.<name>`
    : '';
  return `known: run.id, run.scheduled_time, run.date, run.trigger, pipeline.name, step.name${fromUpstream}, ${declared}; :q after a name shell-quotes it`;
}

/**
 * `${upstream.outputs.<step>.<name>}` and the other `${upstream.…}` names: written as one, in a
 * pipeline that has `on:` and no schedule (a scheduled run has no upstream run to take them
 * from). Which steps the upstream pipelines have is checked with the folder (pipeline-set.ts).
 */
function checkUpstreamRefs(source: YamlSource, def: PipelineFile, path: string, at: At): OutputRef[] {
  const raw = source.data as Record<string, unknown>;
  const texts = [...stringsIn(raw.defaults, ['defaults']), ...stringsIn(raw.steps, ['steps'])];
  for (const [step, s] of Object.entries(def.steps)) {
    if (!s.script_file) continue;
    try {
      texts.push([readScriptFile(path, s.script_file), ['steps', step, 'script_file']]);
    } catch {
      // Said by checkPlaceholders.
    }
  }
  const refs = new Map<string, OutputRef>();
  let used = false;
  for (const [text, where] of texts) {
    for (const bad of malformedUpstreamRefs(text)) {
      at(
        where,
        `${where.join('.')}: ${bad} is not an upstream value: write \${upstream.outputs.<step>.<name>}, \${upstream.run_id}, \${upstream.pipeline} or \${upstream.state} (:q to shell-quote it)`,
      );
    }
    for (const ref of upstreamOutputRefs(text)) {
      refs.set(`${ref.step}\u0000${ref.name}`, ref);
      if (!def.on) {
        at(
          where,
          `${where.join('.')}: \${upstream.outputs.${ref.step}.${ref.name}}: only a pipeline started by other pipelines' runs (on:) has an upstream run`,
        );
      }
    }
    used ||= usesUpstream(text);
  }
  if (used && def.schedule) {
    at(
      ['schedule'],
      'schedule: the steps use ${upstream.…}, which only a run started by an upstream run (on:) has: a scheduled run would have none; drop the schedule, or the upstream values',
    );
  }
  return [...refs.values()];
}

/** Stand-ins for a dry run: `1` fits every field an output may go in (a count of one task). */
function sampleUpstream(refs: readonly OutputRef[]): UpstreamRun {
  const outputs: Record<string, Record<string, string>> = {};
  for (const ref of refs) outputs[ref.step] = { ...outputs[ref.step], [ref.name]: '1' };
  return { runId: 'check', pipeline: 'upstream', state: 'succeeded', outputs };
}

function sampleParams(def: PipelineFile): Record<string, string> {
  return Object.fromEntries(Object.entries(def.params).map(([k, v]) => [k, v === null ? 'x' : String(v)]));
}
