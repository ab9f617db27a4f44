import { readFileSync } from 'node:fs';
import { type Document, isCollection, isNode, isScalar, LineCounter, parseDocument, visit, type YAMLError } from 'yaml';
import type { z } from 'zod';
import { ConfigError } from '../errors.js';

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
      // An unknown key is pointed at itself, with the fields that are allowed there.
      if (issue.code === 'unrecognized_keys') {
        return issue.keys.map((key) => {
          const path = [...issue.path, key];
          return `${locate(source, path)}: ${path.join('.')}: unknown field "${key}"`;
        });
      }
      const field = issue.path.length ? issue.path.join('.') : '(file)';
      return [`${locate(source, issue.path)}: ${field}: ${issue.message}`];
    }),
  );
}
