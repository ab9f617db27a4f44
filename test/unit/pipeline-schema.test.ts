import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { pipelineJsonSchema } from '../../src/pipelines/pipeline-file.js';

describe('config/pipeline.schema.json', () => {
  it('is the JSON Schema generated from the validator (run `npm run schema` after changing the format)', () => {
    const shipped = JSON.parse(readFileSync(new URL('../../config/pipeline.schema.json', import.meta.url), 'utf8'));
    expect(shipped).toEqual(pipelineJsonSchema());
  });

  it('describes the fields editors complete', () => {
    const schema = pipelineJsonSchema() as { properties: Record<string, { properties?: Record<string, unknown> }> };
    expect(Object.keys(schema.properties)).toEqual(
      expect.arrayContaining(['schedule', 'params', 'defaults', 'deadlines', 'webhook', 'steps']),
    );
    expect(schema.properties.schedule?.properties?.overlap).toMatchObject({
      enum: ['skip', 'queue', 'allow'],
      default: 'skip',
    });
  });
});
