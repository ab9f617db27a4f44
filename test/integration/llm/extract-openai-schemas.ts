/**
 * Makes `test/fixtures/openai/chat-completions.yaml` from the OpenAI API document (the
 * shared specs' `openai-openapi.yaml`, 3 MB): its info, and verbatim the
 * component schemas chat completions and the model list need (the closure of
 * `$ref`s from CreateChatCompletionRequest, CreateChatCompletionResponse and
 * ListModelsResponse). Run again when the document changes:
 *
 *   npx tsx test/integration/llm/extract-openai-schemas.ts ../shared/specs/openai-openapi.yaml
 */
import { createHash } from 'node:crypto';
import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { parse, stringify } from 'yaml';

export const ROOT_SCHEMAS = ['CreateChatCompletionRequest', 'CreateChatCompletionResponse', 'ListModelsResponse'];

const source = process.argv[2];
if (!source) throw new Error('usage: extract-openai-schemas.ts <openai-openapi.yaml>');
const text = readFileSync(source, 'utf8');
const doc = parse(text) as {
  openapi: string;
  info: { version: string };
  components: { schemas: Record<string, unknown> };
};
const all = doc.components.schemas;
const needed = new Set<string>();
const visit = (node: unknown): void => {
  if (Array.isArray(node)) {
    for (const item of node) visit(item);
    return;
  }
  if (!node || typeof node !== 'object') return;
  for (const [key, value] of Object.entries(node)) {
    if (key === '$ref' && typeof value === 'string') {
      const name = value.replace('#/components/schemas/', '');
      if (!needed.has(name)) {
        needed.add(name);
        visit(all[name]);
      }
    } else {
      visit(value);
    }
  }
};
for (const name of ROOT_SCHEMAS) {
  needed.add(name);
  visit(all[name]);
}
const extract = {
  openapi: doc.openapi,
  info: doc.info,
  components: { schemas: Object.fromEntries([...needed].sort().map((name) => [name, all[name]])) },
};
const header = [
  `# Extracted from the OpenAI API document (OpenAPI ${doc.openapi}, version ${doc.info.version},`,
  `# sha256 ${createHash('sha256').update(text).digest('hex')}) by extract-openai-schemas.ts:`,
  `# the ${needed.size} component schemas that ${ROOT_SCHEMAS.join(', ')} need, verbatim.`,
  '',
].join('\n');
writeFileSync(
  join(import.meta.dirname, '../../fixtures/openai/chat-completions.yaml'),
  header + stringify(extract, { lineWidth: 0 }),
);
