import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { TERMINAL_RUN_STATES as CLIENT_TERMINAL_RUN_STATES, TERMINAL_JOB_STATES } from '../../src/client/index.js';
import { TERMINAL_REQUEST_STATES, TERMINAL_RUN_STATES } from '../../src/db/schema.js';

/**
 * The client's types are what openapi-typescript makes of the committed document, byte for byte
 * (`npm run build` makes them again; biome leaves the generated file as the tool writes it), and
 * the states its waits end on are the daemon's terminal ones.
 */

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const dir = mkdtempSync(join(tmpdir(), 'schedflow-client-types-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('src/client/api-types.ts', () => {
  it('is what openapi-typescript makes from docs/openapi.json (run `npm run client:types`)', async () => {
    const out = join(dir, 'api-types.ts');
    await promisify(execFile)(join(ROOT, 'node_modules/.bin/openapi-typescript'), ['docs/openapi.json', '-o', out], {
      cwd: ROOT,
    });
    expect(
      readFileSync(join(ROOT, 'src/client/api-types.ts'), 'utf8') === readFileSync(out, 'utf8'),
      'src/client/api-types.ts is not what docs/openapi.json gives: run `npm run client:types`',
    ).toBe(true);
  });

  it("ends its waits on the daemon's terminal states", () => {
    expect([...TERMINAL_JOB_STATES].sort()).toEqual([...TERMINAL_REQUEST_STATES].sort());
    expect([...CLIENT_TERMINAL_RUN_STATES].sort()).toEqual([...TERMINAL_RUN_STATES].sort());
  });
});
