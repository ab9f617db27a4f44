import { RUN_VARIABLES, UPSTREAM_VARIABLES } from './param-substitution.js';

/**
 * When each kind of placeholder a pipeline file may write gets its value (issue 36), for
 * `schedflow validate --render` to say what resolves when. Rendering itself is
 * src/pipelines/param-substitution.ts; this only sorts what a text holds.
 *
 * A table, first match wins: a new kind of placeholder is one entry. The values of the upstream
 * run whose end started this run (`on: { succeeded: [...] }`) are known when it ends, which is
 * when this run is made.
 */

/** When a placeholder's value is known; `step-ended`: when the step it names has ended. */
export type ResolvesAt = 'trigger' | 'upstream-ended' | 'run-made' | 'step-ended';

export type PlaceholderKind = 'param' | 'run' | 'upstream' | 'upstream-output' | 'step-output';

interface KindEntry {
  kind: PlaceholderKind;
  resolves: ResolvesAt;
  /** Matches the dotted name inside `${…}`; a `step` group names the step whose end gives the value. */
  name: RegExp;
}

const IDENT = '[A-Za-z_][A-Za-z0-9_]*';
/** A step name (src/pipelines/pipeline-file.ts): may hold `.`, so it is everything up to the last part. */
const STEP = '[A-Za-z0-9][A-Za-z0-9_.-]*';

const runNames = Object.entries(RUN_VARIABLES)
  .map(([ns, names]) => `${ns}\\.(?:${names.join('|')})`)
  .join('|');

export const PLACEHOLDER_KINDS: readonly KindEntry[] = [
  { kind: 'param', resolves: 'trigger', name: new RegExp(`^params\\.${IDENT}$`) },
  {
    kind: 'upstream-output',
    resolves: 'upstream-ended',
    name: new RegExp(`^upstream\\.outputs\\.${STEP}\\.${IDENT}$`),
  },
  {
    kind: 'upstream',
    resolves: 'upstream-ended',
    name: new RegExp(`^upstream\\.(?:${UPSTREAM_VARIABLES.join('|')})$`),
  },
  { kind: 'run', resolves: 'run-made', name: new RegExp(`^(?:${runNames})$`) },
  {
    kind: 'step-output',
    resolves: 'step-ended',
    name: new RegExp(`^steps\\.(?<step>${STEP})\\.outputs\\.${IDENT}$`),
  },
];

/** `${ name }` or `${ name:modifier }` with a dotted name; a shell's `${HOME}` or `${x%.*}` is not one. */
const PLACEHOLDER = /\$\{\s*([A-Za-z_][A-Za-z0-9_.-]*\.[A-Za-z0-9_.-]+)(?::([A-Za-z]*))?\s*\}/g;

export interface Placeholder {
  /** As written, less spaces: `${params.sample:q}`. */
  written: string;
  /** The dotted name: `params.sample`. */
  name: string;
  kind: PlaceholderKind;
  resolves: ResolvesAt;
  /** For `step-ended`: the step whose end gives the value. */
  step: string | null;
}

/** The kind of one dotted name, or null for a name that is none of schedflow's (the loader refuses those). */
export function kindOf(name: string): Omit<Placeholder, 'written'> | null {
  for (const entry of PLACEHOLDER_KINDS) {
    const match = entry.name.exec(name);
    if (match) return { name, kind: entry.kind, resolves: entry.resolves, step: match.groups?.step ?? null };
  }
  return null;
}

/** The placeholders of a text, in the order written, each once. */
export function placeholdersIn(text: string): Placeholder[] {
  const seen = new Map<string, Placeholder>();
  for (const [, name, modifier] of text.matchAll(PLACEHOLDER)) {
    const written = `\${${name}${modifier === undefined ? '' : `:${modifier}`}}`;
    const kind = kindOf(name as string);
    if (kind && !seen.has(written)) seen.set(written, { written, ...kind });
  }
  return [...seen.values()];
}
