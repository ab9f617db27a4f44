import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import type { ErrorObject, ValidateFunction } from 'ajv';
import { parse } from 'yaml';

// ajv is CommonJS; its 2020-12 build matches OpenAPI 3.1's schema dialect.
const require = createRequire(import.meta.url);
const Ajv2020 = require('ajv/dist/2020') as typeof import('ajv/dist/2020.js').default;

export type OpenAiSchemaName = 'CreateChatCompletionRequest' | 'CreateChatCompletionResponse' | 'ListModelsResponse';

let validators: Map<OpenAiSchemaName, ValidateFunction> | undefined;

type Json = Record<string, unknown>;

/**
 * The document mixes OpenAPI 3.0's `nullable: true` into 3.1 schemas, some
 * without a `type` (beside `oneOf` or `$ref`), which ajv refuses. Written the
 * 3.1 way: `null` joins the types, or the schema becomes `anyOf [it, null]`.
 */
function withoutNullable(node: unknown): unknown {
  if (Array.isArray(node)) return node.map(withoutNullable);
  if (!node || typeof node !== 'object') return node;
  const out: Json = {};
  for (const [key, value] of Object.entries(node as Json)) out[key] = withoutNullable(value);
  if (out.nullable !== true) {
    delete out.nullable;
    return out;
  }
  delete out.nullable;
  if (typeof out.type === 'string') return { ...out, type: [out.type, 'null'] };
  if (Array.isArray(out.type)) return { ...out, type: [...new Set([...out.type, 'null'])] };
  const { description, default: fallback, ...rest } = out;
  return { description, default: fallback, anyOf: [rest, { type: 'null' }] };
}

/**
 * Validators for the chat-completions schemas of the OpenAI document (the
 * extract next to this file). Not strict: the document carries `x-` keywords,
 * OpenAPI 3.0's `nullable` beside 3.1 types, and formats ajv does not know.
 */
function load(): Map<OpenAiSchemaName, ValidateFunction> {
  if (validators) return validators;
  const doc = parse(readFileSync(join(import.meta.dirname, '../../fixtures/openai/chat-completions.yaml'), 'utf8')) as {
    components: { schemas: Record<string, unknown> };
  };
  const ajv = new Ajv2020({ strict: false, validateFormats: false, allErrors: true });
  ajv.addSchema({ $id: 'openai', components: withoutNullable(doc.components) }, 'openai');
  validators = new Map(
    (['CreateChatCompletionRequest', 'CreateChatCompletionResponse', 'ListModelsResponse'] as const).map((name) => [
      name,
      ajv.compile({ $ref: `openai#/components/schemas/${name}` }),
    ]),
  );
  return validators;
}

/** The schema's complaints about `value` (empty when valid), as `path: message` lines. */
export function openAiProblems(name: OpenAiSchemaName, value: unknown): string[] {
  const validate = load().get(name) as ValidateFunction;
  if (validate(value)) return [];
  return (validate.errors ?? []).map((e: ErrorObject) => `${e.instancePath || '(root)'}: ${e.message}`);
}
