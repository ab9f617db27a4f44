/**
 * `${namespace.name}` templating in pipeline files. Only dotted names are
 * ours (`${params.sample}`, `${run.id}`), so a shell's `${HOME}` in a script is
 * left alone; an unknown dotted name is an error, never an empty string.
 */

const PLACEHOLDER = /\$\{\s*([A-Za-z_][A-Za-z0-9_]*)\.([A-Za-z_][A-Za-z0-9_]*)\s*\}/g;

/** Names a template may use besides `params.*`. */
export const RUN_VARIABLES = {
  run: ['id', 'scheduled_time', 'date', 'trigger'],
  pipeline: ['name'],
  step: ['name'],
} as const;

export type TemplateContext = Record<string, Record<string, string>>;

/** The placeholders in a text that the names allowed do not cover, as `ns.name`. */
export function unknownPlaceholders(text: string, params: ReadonlySet<string>): string[] {
  const unknown: string[] = [];
  for (const [, ns, name] of text.matchAll(PLACEHOLDER)) {
    if (!isKnown(ns as string, name as string, params)) unknown.push(`${ns}.${name}`);
  }
  return unknown;
}

function isKnown(ns: string, name: string, params: ReadonlySet<string>): boolean {
  if (ns === 'params') return params.has(name);
  const names: readonly string[] | undefined = RUN_VARIABLES[ns as keyof typeof RUN_VARIABLES];
  return names?.includes(name) ?? false;
}

export class TemplateError extends Error {
  override name = 'TemplateError';
}

/** Replaces every placeholder; one the context lacks is an error naming it. */
export function render(text: string, context: TemplateContext): string {
  return text.replace(PLACEHOLDER, (_match, ns: string, name: string) => {
    const value = context[ns]?.[name];
    if (value === undefined) throw new TemplateError(`unknown template name \${${ns}.${name}}`);
    return value;
  });
}

/** Renders every string inside a JSON-like value. */
export function renderDeep<T>(value: T, context: TemplateContext): T {
  if (typeof value === 'string') return render(value, context) as T;
  if (Array.isArray(value)) return value.map((v) => renderDeep(v, context)) as T;
  if (value !== null && typeof value === 'object') {
    return Object.fromEntries(Object.entries(value).map(([k, v]) => [k, renderDeep(v, context)])) as T;
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
