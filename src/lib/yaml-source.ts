import { readFileSync } from 'node:fs';
import { type Document, isCollection, isNode, isScalar, LineCounter, parseDocument, visit, type YAMLError } from 'yaml';
import type { z } from 'zod';
import { ConfigError } from '../errors.js';
import { closestName } from './closest-name.js';

/** A YAML (or JSON, which is YAML) file parsed with positions, so problems can say file:line:column. */
export interface YamlSource {
  file: string;
  doc: Document;
  lines: LineCounter;
  data: unknown;
}

/** A YAML or JSON source that cannot be read or is not what it must be: every problem found, each on its line. */
export class SourceError extends ConfigError {
  constructor(readonly problems: string[]) {
    super(problems.join('\n'));
  }
}

function readText(file: string): string {
  try {
    return readFileSync(file, 'utf8');
  } catch (error) {
    throw new SourceError([
      `${file}: cannot read: ${(error as NodeJS.ErrnoException).code === 'ENOENT' ? 'no such file' : (error as Error).message}`,
    ]);
  }
}

/**
 * Aliases a file may expand in all. Each alias copies its anchor's whole value, so
 * nested anchors grow exponentially ("billion laughs"); hand-written
 * configuration never needs many.
 */
export const MAX_YAML_ALIASES = 100;

export function readYamlSource(file: string, text = readText(file)): YamlSource {
  const lines = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lines, prettyErrors: false, uniqueKeys: true });
  const at = (offset: number) => {
    const { line, col } = lines.linePos(offset);
    return `${file}:${line}:${col}`;
  };
  if (doc.errors.length > 0) {
    throw new SourceError(doc.errors.map((e) => `${at(problemStart(doc, e))}: ${e.message.split('\n')[0]}`));
  }
  let data: unknown;
  try {
    data = doc.toJS({ maxAliasCount: MAX_YAML_ALIASES });
  } catch (error) {
    // yaml throws a bare ReferenceError for too many aliases; say where the aliasing starts.
    if (!(error instanceof ReferenceError)) throw error;
    throw new SourceError([
      `${at(firstAliasOffset(doc))}: aliases expand to more than ${MAX_YAML_ALIASES} copies (a YAML alias bomb?): write the values out`,
    ]);
  }
  return { file, doc, lines, data };
}

/**
 * Where a syntax error begins. yaml reports an unclosed quote or flow collection
 * at the offset where it gave up, often the end of the file; the construct that
 * was left open starts at the node whose value ends there.
 */
function problemStart(doc: Document, error: YAMLError): number {
  const offset = error.pos[0];
  const unclosedQuote = error.code === 'MISSING_CHAR' && error.message.includes('quote');
  const unclosedFlow = error.code === 'BAD_INDENT' && error.message.startsWith('Flow ');
  if (!unclosedQuote && !unclosedFlow) return offset;
  let start = offset;
  visit(doc, {
    Node(_key, node) {
      const open = unclosedQuote
        ? isScalar(node) && (node.type === 'QUOTE_DOUBLE' || node.type === 'QUOTE_SINGLE')
        : isCollection(node) && node.flow === true;
      // The innermost match wins: visit goes outside in.
      if (open && node.range && node.range[1] === offset) start = node.range[0];
    },
  });
  return start;
}

function firstAliasOffset(doc: Document): number {
  let offset = 0;
  visit(doc, {
    Alias(_key, node) {
      offset = node.range?.[0] ?? 0;
      return visit.BREAK;
    },
  });
  return offset;
}

/** `file:line:column` of the node at a path, or of its nearest existing parent. */
export function locate(source: YamlSource, path: readonly PropertyKey[]): string {
  for (let depth = path.length; depth >= 0; depth--) {
    const node = source.doc.getIn(path.slice(0, depth) as unknown[], true);
    // For a missing key, point at the parent map; for a present one, at its value.
    if (isNode(node) && node.range) {
      const { line, col } = source.lines.linePos(node.range[0]);
      return `${source.file}:${line}:${col}`;
    }
  }
  return `${source.file}:1:1`;
}

/** Validates a source with a zod schema; problems name file:line:column, the field and the reason. */
export function parseSource<S extends z.ZodType>(source: YamlSource, schema: S): z.output<S> {
  const parsed = schema.safeParse(source.data);
  if (parsed.success) return parsed.data;
  throw new SourceError(
    parsed.error.issues.flatMap((issue) => {
      // An unknown key is pointed at itself, with the field allowed there it is a slip for.
      if (issue.code === 'unrecognized_keys') {
        const known = fieldsAt(schema, issue.path, source.data);
        return issue.keys.map((key) => {
          const path = [...issue.path, key];
          const near = closestName(key, known);
          return `${locate(source, path)}: ${path.join('.')}: unknown field "${key}"${near ? `; did you mean "${near}"?` : ''}`;
        });
      }
      const field = issue.path.length ? issue.path.join('.') : '(file)';
      return [`${locate(source, issue.path)}: ${field}: ${issue.message}`];
    }),
  );
}

/**
 * The parts of a zod schema's definition the walk below reads. zod 4 exposes every schema's
 * definition as `.def`; the fields present depend on its `type`.
 */
interface SchemaDef {
  type: string;
  innerType?: z.ZodType;
  in?: z.ZodType;
  shape?: Record<string, z.ZodType>;
  valueType?: z.ZodType;
  element?: z.ZodType;
  options?: z.ZodType[];
  discriminator?: string;
  values?: unknown[];
  left?: z.ZodType;
  right?: z.ZodType;
}

const defOf = (schema: z.ZodType): SchemaDef => schema.def as unknown as SchemaDef;

/**
 * The field names an object of `schema` takes at `path` of `data`, for "did you mean": the
 * schema walked along the path (through optional, default and piped schemas, records and
 * arrays); a discriminated union by the value the data gives its discriminator, any other
 * union by all its options. Empty where no object is found.
 */
export function fieldsAt(schema: z.ZodType, path: readonly PropertyKey[], data: unknown): string[] {
  const def = defOf(schema);
  switch (def.type) {
    case 'optional':
    case 'nullable':
    case 'default':
    case 'prefault':
    case 'catch':
    case 'readonly':
    case 'nonoptional':
      return def.innerType ? fieldsAt(def.innerType, path, data) : [];
    case 'pipe':
      return def.in ? fieldsAt(def.in, path, data) : [];
    case 'intersection':
      return [
        ...(def.left ? fieldsAt(def.left, path, data) : []),
        ...(def.right ? fieldsAt(def.right, path, data) : []),
      ];
    case 'union': {
      const options = def.options ?? [];
      const tag = def.discriminator;
      const given = tag && isRecord(data) ? data[tag] : undefined;
      const chosen =
        given === undefined
          ? []
          : options.filter((o) => {
              const field = defOf(o).shape?.[tag as string];
              return field !== undefined && (defOf(field).values ?? []).includes(given);
            });
      return [...new Set((chosen.length ? chosen : options).flatMap((o) => fieldsAt(o, path, data)))];
    }
    case 'object': {
      const shape = def.shape ?? {};
      if (path.length === 0) return Object.keys(shape);
      const [key, ...rest] = path;
      const field = typeof key === 'string' ? shape[key] : undefined;
      return field ? fieldsAt(field, rest, isRecord(data) ? data[key as string] : undefined) : [];
    }
    case 'record': {
      const [key, ...rest] = path;
      if (path.length === 0 || !def.valueType) return [];
      return fieldsAt(def.valueType, rest, isRecord(data) ? data[key as string] : undefined);
    }
    case 'array': {
      const [index, ...rest] = path;
      if (path.length === 0 || !def.element) return [];
      return fieldsAt(def.element, rest, Array.isArray(data) ? data[Number(index)] : undefined);
    }
    default:
      return [];
  }
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}
