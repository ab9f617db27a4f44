/**
 * `${namespace.name}` templating in pipeline files. Only dotted names are
 * ours (`${params.sample}`, `${run.id}`), so a shell's `${HOME}` in a script is
 * left alone; an unknown dotted name is an error, never an empty string.
 *
 * `${params.sample}` pastes the value as it is; `${params.sample:q}` pastes it
 * as one POSIX shell word, single-quoted. Parameters come from whoever
 * triggers a run, so a script should take them with `:q`: the plain form in
 * a script lets a value such as `"; rm -rf ~; echo "` run commands. The plain
 * form stays literal because it is also used outside scripts (job names,
 * environment values, paths), where quotes would be wrong, and because
 * existing scripts wrap it in their own quotes (`"${params.x}"`), which a
 * quoting default would silently change into a value with quote characters.
 */

const PLACEHOLDER = /\$\{\s*([A-Za-z_][A-Za-z0-9_]*)\.([A-Za-z_][A-Za-z0-9_]*)(?::([A-Za-z]*))?\s*\}/g;

/** What may follow a name after a colon: `q` shell-quotes the value. */
const MODIFIERS = ['q'] as const;

/** Names a template may use besides `params.*`. */
export const RUN_VARIABLES = {
  run: ['id', 'scheduled_time', 'date', 'trigger'],
  pipeline: ['name'],
  step: ['name'],
} as const;

/**
 * Names of the run whose end started this one (the pipeline file's `on:`): `${upstream.run_id}`
 * and the others, with its outputs as `${upstream.outputs.<step>.<name>}`. Known when the run is
 * made; a run started otherwise has none (src/pipelines/run-plan.ts refuses it).
 */
export const UPSTREAM_VARIABLES = ['run_id', 'pipeline', 'state'] as const;

export type TemplateContext = Record<string, Record<string, string>>;

/** The upstream run's outputs by step and name, for `${upstream.outputs.<step>.<name>}`. */
export type UpstreamOutputs = Readonly<Record<string, Readonly<Record<string, string>>>>;

/**
 * The placeholders in a text that the names allowed do not cover, as `ns.name`. `upstream`:
 * whether `${upstream.…}` names are allowed (a pipeline with `on:`).
 */
export function unknownPlaceholders(text: string, params: ReadonlySet<string>, upstream = false): string[] {
  const unknown: string[] = [];
  for (const [, ns, name, modifier] of text.matchAll(PLACEHOLDER)) {
    if (!isKnown(ns as string, name as string, params, upstream) || !isModifier(modifier)) {
      unknown.push(`${ns}.${name}${modifier === undefined ? '' : `:${modifier}`}`);
    }
  }
  return unknown;
}

function isKnown(ns: string, name: string, params: ReadonlySet<string>, upstream: boolean): boolean {
  if (ns === 'params') return params.has(name);
  if (ns === 'upstream') return upstream && (UPSTREAM_VARIABLES as readonly string[]).includes(name);
  const names: readonly string[] | undefined = RUN_VARIABLES[ns as keyof typeof RUN_VARIABLES];
  return names?.includes(name) ?? false;
}

function isModifier(modifier: string | undefined): boolean {
  return modifier === undefined || (MODIFIERS as readonly string[]).includes(modifier);
}

/** One POSIX shell word whatever the value: inside single quotes nothing is special but `'`, closed, escaped and reopened. */
export function shellQuote(value: string): string {
  return `'${value.replaceAll("'", "'\\''")}'`;
}

export class TemplateError extends Error {
  override name = 'TemplateError';
}

/**
 * `${upstream.outputs.<step>.<name>}` (`:q` too): an output of the run whose end started this one.
 * Step names may hold `.`, so the step is everything up to the last `.`.
 */
const UPSTREAM_OUTPUT =
  /\$\{\s*upstream\.outputs\.([A-Za-z0-9][A-Za-z0-9_.-]*)\.([A-Za-z_][A-Za-z0-9_]*)(?::([A-Za-z]*))?\s*\}/g;
/** Anything that starts like an upstream name, to tell a misspelt one from text that is not ours. */
const UPSTREAM_LIKE = /\$\{\s*upstream\.[^}]*\}?/g;

/** One pass over both kinds, so a value pasted in is never read again as a placeholder. */
const ANY_PLACEHOLDER = new RegExp(`${UPSTREAM_OUTPUT.source}|${PLACEHOLDER.source}`, 'g');

/** The upstream outputs a text uses, each once. */
export function upstreamOutputRefs(text: string): OutputRef[] {
  const seen = new Map<string, OutputRef>();
  for (const [, step, name] of text.matchAll(UPSTREAM_OUTPUT)) {
    seen.set(`${step}\u0000${name}`, { step: step as string, name: name as string });
  }
  return [...seen.values()];
}

/**
 * What in a text starts like an upstream name but is neither an output (`${upstream.output.x}`,
 * a modifier that is not `q`) nor a name of the run (`${upstream.state}`, checked with the others
 * by unknownPlaceholders): refused at load, rather than left for the shell to choke on.
 */
export function malformedUpstreamRefs(text: string): string[] {
  const bad: string[] = [];
  for (const [written] of text.matchAll(UPSTREAM_LIKE)) {
    const output = [...written.matchAll(UPSTREAM_OUTPUT)][0];
    if (output && output[0] === written && isModifier(output[3])) continue;
    const name = [...written.matchAll(PLACEHOLDER)][0];
    if (name && name[0] === written) continue;
    bad.push(written);
  }
  return bad;
}

/** Whether a text uses any `${upstream.…}` name. */
export function usesUpstream(text: string): boolean {
  if (upstreamOutputRefs(text).length > 0) return true;
  return [...text.matchAll(PLACEHOLDER)].some(([, ns]) => ns === 'upstream');
}

/** Replaces every placeholder; one the context lacks is an error naming it. */
export function render(text: string, context: TemplateContext, upstreamOutputs?: UpstreamOutputs): string {
  return text.replace(
    ANY_PLACEHOLDER,
    (
      _match,
      upStep: string | undefined,
      upName: string | undefined,
      upModifier: string | undefined,
      ns: string | undefined,
      name: string | undefined,
      modifier: string | undefined,
    ) => {
      if (upStep !== undefined && upName !== undefined) {
        const value = upstreamOutputs?.[upStep]?.[upName];
        const written = `upstream.outputs.${upStep}.${upName}`;
        if (!upstreamOutputs) throw new TemplateError(`\${${written}}: this run was not started by an upstream run`);
        if (value === undefined) {
          throw new TemplateError(`\${${written}}: the upstream run's step "${upStep}" wrote no output "${upName}"`);
        }
        if (!isModifier(upModifier)) throw new TemplateError(`unknown modifier :${upModifier} on ${written}`);
        return upModifier === 'q' ? shellQuote(value) : value;
      }
      // Own keys only: `${constructor.name}` is not a name of ours.
      const names = ns !== undefined && Object.hasOwn(context, ns) ? context[ns] : undefined;
      const value = names && name !== undefined && Object.hasOwn(names, name) ? names[name] : undefined;
      if (value === undefined || !isModifier(modifier)) {
        const written = `${ns}.${name}${modifier === undefined ? '' : `:${modifier}`}`;
        if (ns === 'upstream' && !context.upstream) {
          throw new TemplateError(`\${${written}}: this run was not started by an upstream run`);
        }
        throw new TemplateError(`unknown template name \${${written}}`);
      }
      return modifier === 'q' ? shellQuote(value) : value;
    },
  );
}

/** Renders every string inside a JSON-like value. */
export function renderDeep<T>(value: T, context: TemplateContext, upstreamOutputs?: UpstreamOutputs): T {
  if (typeof value === 'string') return render(value, context, upstreamOutputs) as T;
  if (Array.isArray(value)) return value.map((v) => renderDeep(v, context, upstreamOutputs)) as T;
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, renderDeep(v, context, upstreamOutputs)])) as T;
  }
  return value;
}

/** Every string in a JSON-like value with its path, to check placeholders where they are written. */
export function* stringsIn(value: unknown, path: PropertyKey[] = []): Generator<[string, PropertyKey[]]> {
  if (typeof value === 'string') yield [value, path];
  else if (Array.isArray(value)) for (const [i, v] of value.entries()) yield* stringsIn(v, [...path, i]);
  else if (value !== null && typeof value === 'object') {
    for (const [k, v] of Object.entries(value)) yield* stringsIn(v, [...path, k]);
  }
}

/**
 * `${steps.<step>.outputs.<name>}` (`:q` too): a value another step of the run writes as it runs
 * (src/pipelines/step-outputs.ts). Not known when the run is made: a step using one is rendered
 * when its producing step has ended (src/pipelines/deferred-steps.ts). Step names may hold `.`,
 * so the step is everything up to the last `.outputs.`.
 */
const STEP_OUTPUT =
  /\$\{\s*steps\.([A-Za-z0-9][A-Za-z0-9_.-]*)\.outputs\.([A-Za-z_][A-Za-z0-9_]*)(?::([A-Za-z]*))?\s*\}/g;
/** Anything that starts like a step output, to tell a misspelt one from text that is not ours. */
const STEP_OUTPUT_LIKE = /\$\{\s*steps\.[^}]*\}?/g;

export interface OutputRef {
  step: string;
  name: string;
}

/** The step outputs a text uses, each once. */
export function outputRefs(text: string): OutputRef[] {
  const seen = new Map<string, OutputRef>();
  for (const [, step, name] of text.matchAll(STEP_OUTPUT)) {
    seen.set(`${step}\u0000${name}`, { step: step as string, name: name as string });
  }
  return [...seen.values()];
}

/** How many step outputs a JSON-like value holds, each place one is written counted. */
export function outputRefOccurrences(value: unknown): number {
  let count = 0;
  for (const [text] of stringsIn(value)) count += [...text.matchAll(STEP_OUTPUT)].length;
  return count;
}

/** The step outputs used anywhere in a JSON-like value, each once. */
export function outputRefsDeep(value: unknown): OutputRef[] {
  const seen = new Map<string, OutputRef>();
  for (const [text] of stringsIn(value)) {
    for (const ref of outputRefs(text)) seen.set(`${ref.step}\u0000${ref.name}`, ref);
  }
  return [...seen.values()];
}

/**
 * What in a text starts like a step output but is not one (`${steps.a.output.b}`, a modifier
 * that is not `q`): refused at load, rather than left for the shell to choke on.
 */
export function malformedOutputRefs(text: string): string[] {
  const bad: string[] = [];
  for (const [written] of text.matchAll(STEP_OUTPUT_LIKE)) {
    const match = [...written.matchAll(STEP_OUTPUT)][0];
    if (!match || match[0] !== written || !isModifier(match[3])) bad.push(written);
  }
  return bad;
}

/**
 * Replaces every step output in a text with its value (`:q`: shell-quoted). `outputOf` says the
 * value, or throws what is wrong (a step that wrote no such output).
 */
export function renderOutputs(text: string, outputOf: (ref: OutputRef) => string): string {
  return text.replace(STEP_OUTPUT, (_match, step: string, name: string, modifier: string | undefined) => {
    if (!isModifier(modifier))
      throw new TemplateError(`unknown modifier :${modifier} on steps.${step}.outputs.${name}`);
    const value = outputOf({ step, name });
    return modifier === 'q' ? shellQuote(value) : value;
  });
}

/** Renders the step outputs in every string inside a JSON-like value. */
export function renderOutputsDeep<T>(value: T, outputOf: (ref: OutputRef) => string): T {
  if (typeof value === 'string') return renderOutputs(value, outputOf) as T;
  if (Array.isArray(value)) return value.map((v) => renderOutputsDeep(v, outputOf)) as T;
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, renderOutputsDeep(v, outputOf)])) as T;
  }
  return value;
}

/** Whether a text is one step output and nothing else (`array: ${steps.split.outputs.chunks}`). */
export function isOneOutputRef(text: string): boolean {
  const match = [...text.matchAll(STEP_OUTPUT)][0];
  return match !== undefined && match[0] === text.trim();
}
