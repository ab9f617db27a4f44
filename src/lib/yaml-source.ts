import { readFileSync } from 'node:fs';
import { type Document, isNode, LineCounter, parseDocument } from 'yaml';
import type { z } from 'zod';

/** A YAML (or JSON, which is YAML) file parsed with positions, so problems can say file:line:column. */
export interface YamlSource {
  file: string;
  doc: Document;
  lines: LineCounter;
  data: unknown;
}

export class SourceError extends Error {
  override name = 'SourceError';
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

export function readYamlSource(file: string, text = readText(file)): YamlSource {
  const lines = new LineCounter();
  const doc = parseDocument(text, { lineCounter: lines, prettyErrors: false, uniqueKeys: true });
  if (doc.errors.length > 0) {
    throw new SourceError(
      doc.errors.map((e) => {
        const pos = e.linePos?.[0] ?? lines.linePos(e.pos[0]);
        return `${file}:${pos.line}:${pos.col}: ${e.message.split('\n')[0]}`;
      }),
    );
  }
  return { file, doc, lines, data: doc.toJS() };
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
