import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { validateAgainstSpec } from '../../../src/sched/spec-validator.js';
import { REPO, runCli } from '../../helpers/cli-process.js';
import { writeProfile } from '../../helpers/daemon.js';

/** `schedflow validate`, `validate --render` and `schedflow pipelines`, as a user's CI runs them. */

let root: string;
let config: string;

beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'schedflow-pcli-'));
  config = join(root, 'config');
  // A profile bound to account lab, pinned to v0.0.42 (no scheduler is contacted).
  writeProfile(config, 'http://127.0.0.1:9', { version: 'v0.0.42', partition: 'lab-owner' });
  mkdirSync(join(config, 'pipelines'));
  writeFileSync(
    join(config, 'pipelines', 'good.yaml'),
    [
      'schedule:',
      '  cron: "15 3 * * *"',
      '  timezone: Europe/Berlin',
      'params:',
      '  sample: A1',
      'steps:',
      '  fetch:',
      '    script: "#!/bin/sh\\necho ${params.sample}\\n"',
      '    time_limit: "1:00:00"',
      '  align:',
      '    needs: [fetch]',
      '    script: "#!/bin/sh\\necho align\\n"',
    ].join('\n'),
  );
  writeFileSync(
    join(root, 'bad.yaml'),
    ['steps:', '  a:', '    script: "#!/bin/sh\\n"', '    account: physics', '    cpus: 2'].join('\n'),
  );
});

afterAll(() => {
  rmSync(root, { recursive: true, force: true });
});

describe('schedflow validate', () => {
  it('exit 0 and one line per valid file; the shipped examples are valid too', async () => {
    const result = await runCli(['validate', join(config, 'pipelines'), '--config', config]);
    expect(result).toMatchObject({ code: 0, stderr: '' });
    expect(result.stdout).toBe(
      `ok  ${join(config, 'pipelines', 'good.yaml')}  pipeline good: 2 steps (fetch → align), cron "15 3 * * *" (Europe/Berlin)\n`,
    );
    const examples = await runCli(['validate', 'config/pipelines', 'config/examples/pipelines'], { cwd: REPO });
    expect(examples.code, examples.stderr).toBe(0);
  });

  it('exit 2 with file:line:column problems on stderr for an invalid file', async () => {
    const result = await runCli(['validate', join(root, 'bad.yaml'), '--config', config]);
    expect(result.code).toBe(2);
    expect(result.stdout).toBe('');
    expect(result.stderr).toBe(
      `${join(root, 'bad.yaml')}:5:11: steps.a.cpus: unknown field "cpus"\n1 invalid pipeline file\n`,
    );
  });

  it('a YAML alias bomb and an unclosed quote: exit 2 with where each starts, no stack trace', async () => {
    const bomb = join(root, 'bomb.yaml');
    writeFileSync(
      bomb,
      [
        'a: &a ["x","x","x","x","x","x","x","x","x"]',
        'b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]',
        'c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]',
        'd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]',
        'steps: { a: { script: "#!/bin/sh\\n" } }',
      ].join('\n'),
    );
    const quote = join(root, 'quote.yaml');
    writeFileSync(quote, 'steps:\n  a:\n    script: "#!/bin/sh\n    name: x\n  b:\n    script: y\n');
    const result = await runCli(['validate', bomb, quote, '--config', config]);
    expect(result.code).toBe(2);
    expect(result.stderr).toBe(
      [
        `${bomb}:2:8: aliases expand to more than 100 copies (a YAML alias bomb?): write the values out`,
        `${quote}:3:13: Missing closing "quote`,
        '2 invalid pipeline files\n',
      ].join('\n'),
    );
  });

  it('refuses what the daemon refuses: one pipeline name in x.yaml and x.yml, even when only one is named', async () => {
    const dup = join(root, 'dup');
    mkdirSync(dup);
    const [yaml, yml] = [join(dup, 'x.yaml'), join(dup, 'x.yml')];
    for (const file of [yaml, yml]) writeFileSync(file, 'steps:\n  a:\n    script: "#!/bin/sh\\n"\n');
    const fix = ': give each file its own name (name:) or file name';
    const both = await runCli(['validate', dup, '--config', config]);
    expect(both).toMatchObject({ code: 2, stdout: '' });
    expect(both.stderr).toBe(
      `${yaml}: pipeline name "x" is also used by ${yml}${fix}\n${yml}: pipeline name "x" is also used by ${yaml}${fix}\n2 invalid pipeline files\n`,
    );
    const one = await runCli(['validate', yaml, '--config', config]);
    expect(one).toMatchObject({ code: 2, stdout: '' });
    expect(one.stderr).toBe(`${yaml}: pipeline name "x" is also used by ${yml}${fix}\n1 invalid pipeline file\n`);
  });

  it('names the account the profile token is bound to', async () => {
    writeFileSync(join(root, 'account.yaml'), 'steps:\n  a:\n    script: "#!/bin/sh\\n"\n    account: physics\n');
    const result = await runCli(['validate', join(root, 'account.yaml'), '--config', config]);
    expect(result.code).toBe(2);
    expect(result.stderr).toContain(
      `${join(root, 'account.yaml')}:4:14: steps.a.account: account "physics" differs from the account "lab" that profile "test"'s token is bound to`,
    );
  });

  it('--render prints the submit bodies, valid against the profile API version', async () => {
    const result = await runCli([
      'validate',
      join(config, 'pipelines', 'good.yaml'),
      '--config',
      config,
      '--render',
      '--param',
      'sample=B2',
    ]);
    expect(result.code, result.stderr).toBe(0);
    const rendered = JSON.parse(result.stdout) as { version: string; steps: { step: string; body: unknown }[] };
    expect(rendered.version).toBe('v0.0.42');
    for (const step of rendered.steps) {
      expect(validateAgainstSpec('v0.0.42', 'job_submit_req', step.body).errors, step.step).toEqual([]);
    }
    expect(rendered.steps.map((s) => s.body)).toEqual([
      {
        job: expect.objectContaining({
          name: 'good.fetch',
          script: '#!/bin/sh\necho B2\n',
          account: 'lab',
          partition: 'lab-owner',
          comment: 'schedflow:<request id>',
          time_limit: { set: true, infinite: false, number: 60 },
        }),
      },
      { job: expect.objectContaining({ name: 'good.align', dependency: 'afterok:<fetch>' }) },
    ]);
    const unknown = await runCli([
      'validate',
      join(config, 'pipelines', 'good.yaml'),
      '--config',
      config,
      '--render',
      '--param',
      'x=1',
    ]);
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toContain('unknown parameter "x"; this pipeline takes sample');
  });
});

describe('schedflow pipelines', () => {
  it('lists each pipeline with its next five fire times', async () => {
    const result = await runCli(['pipelines', '--config', config, '--json']);
    expect(result.code, result.stderr).toBe(0);
    const [good] = JSON.parse(result.stdout) as { name: string; next: string[]; steps: string[] }[];
    expect(good?.name).toBe('good');
    expect(good?.steps).toEqual(['fetch', 'align']);
    expect(good?.next).toHaveLength(5);
    // 03:15 in Berlin is 02:15 UTC in winter (01:15 in summer).
    for (const t of good?.next ?? []) expect(t).toMatch(/T0[12]:15:00\.000Z$/);
    const text = await runCli(['pipelines', '--config', config]);
    expect(text.stdout.split('\n')[0]?.split(/ {2,}/)).toEqual(['PIPELINE', 'SCHEDULE', 'STEPS', 'NEXT']);
    expect(text.stdout).toContain('good: next fire times');
  });
});
