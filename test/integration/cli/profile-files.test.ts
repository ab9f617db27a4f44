import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runCli } from '../../helpers/cli-process.js';

/**
 * Mistakes in a profile file (config/profiles/<name>.yaml) as the commands that read profiles
 * report them: every problem on its line, with file:line:column, and an unknown key with the
 * field it is a slip for, as job and pipeline files have them.
 */

let root: string;
let config: string;
let pipelineFile: string;

beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'schedflow-profiles-'));
  config = join(root, 'config');
  mkdirSync(join(config, 'profiles'), { recursive: true });
  pipelineFile = join(root, 'p.yaml');
  writeFileSync(pipelineFile, 'steps:\n  a:\n    script: "#!/bin/sh\\ntrue\\n"\n');
});

afterAll(() => {
  rmSync(root, { recursive: true, force: true });
});

function writeProfile(text: string): string {
  const file = join(config, 'profiles', 'lab.yaml');
  writeFileSync(file, text);
  return file;
}

describe('profile files', () => {
  it('unknown keys: each with file:line:column and "did you mean", the schema walked into auth and timeouts', async () => {
    const file = writeProfile(
      [
        'url: http://127.0.0.1:9',
        'auth:',
        '  type: bearer',
        '  tokenFle: /etc/schedflow/lab.token',
        'acount: lab',
        'timeouts:',
        '  requestMS: 5000',
        'colour: blue',
        '',
      ].join('\n'),
    );
    const result = await runCli(['validate', pipelineFile, '--config', config]);
    expect(result.code).toBe(2);
    expect(result.stdout).toBe('');
    // In the schema's order (nested objects first, as zod reports them).
    expect(result.stderr).toBe(
      [
        `schedflow: ${file}:4:13: auth.tokenFle: unknown field "tokenFle"; did you mean "tokenFile"?`,
        `${file}:7:14: timeouts.requestMS: unknown field "requestMS"; did you mean "requestMs"?`,
        `${file}:5:9: acount: unknown field "acount"; did you mean "account"?`,
        `${file}:8:9: colour: unknown field "colour"`,
        '',
      ].join('\n'),
    );
  });

  it('a bad value and a YAML mistake are placed too; auth with two token sources points at auth', async () => {
    const file = writeProfile(
      ['url: not a url', 'auth: { type: bearer, tokenEnv: T }', 'concurrency: -1', ''].join('\n'),
    );
    const bad = await runCli(['validate', pipelineFile, '--config', config]);
    expect(bad.code).toBe(2);
    expect(bad.stderr).toMatch(new RegExp(`^schedflow: ${file}:1:6: url: `));
    expect(bad.stderr).toContain(`${file}:3:14: concurrency: `);

    const broken = writeProfile(['url: http://127.0.0.1:9', 'auth: { type: bearer', ''].join('\n'));
    const yaml = await runCli(['validate', pipelineFile, '--config', config]);
    expect(yaml.code).toBe(2);
    expect(yaml.stderr).toMatch(new RegExp(`^schedflow: ${broken}:2:7: `));

    writeProfile(
      ['url: http://127.0.0.1:9', 'auth:', '  type: bearer', '  tokenEnv: T', '  tokenFile: /t', ''].join('\n'),
    );
    const both = await runCli(['validate', pipelineFile, '--config', config]);
    expect(both.code).toBe(2);
    expect(both.stderr).toBe(`schedflow: ${file}:3:3: auth needs exactly one of tokenEnv or tokenFile\n`);
  });
});
