import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { validateAgainstSpec } from '../../../src/sched/spec-validator.js';
import { REPO, runCli } from '../../helpers/cli-process.js';
import { writeProfile } from '../../helpers/profile-file.js';

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

  it('--render says when each step is submitted and what resolves when; a deferred step shows its outputs as written', async () => {
    const dir = join(root, 'fanout');
    mkdirSync(dir);
    const file = join(dir, 'fanout.yaml');
    writeFileSync(
      file,
      [
        'params:',
        '  sample: A1',
        'defaults:',
        '  current_working_directory: /shared/lab/${run.date}',
        'steps:',
        '  split:',
        '    script: "#!/bin/sh\\nsplit ${params.sample:q}\\necho chunks=3 >> \\"$SCHEDFLOW_OUTPUTS\\"\\n"',
        '  align:',
        '    needs: [split]',
        '    array: ${steps.split.outputs.chunks}',
        '    script_file: align.sh',
        '  report:',
        '    needs: [align]',
        '    script: "#!/bin/sh\\nreport --sum ${steps.split.outputs.sum:q}\\n"',
        '  notify:',
        '    needs: [report]',
        '    name: notify-${run.id}',
        '    script: "#!/bin/sh\\nmail ${params.sample:q}\\n"',
      ].join('\n'),
    );
    writeFileSync(join(dir, 'align.sh'), '#!/bin/sh\nalign --tag ${step.name} $SLURM_ARRAY_TASK_ID\n');
    const args = ['validate', file, '--config', config, '--render', '--param', 'sample=B2'];

    const json = await runCli(args);
    expect(json.code, json.stderr).toBe(0);
    interface Step {
      step: string;
      body: { job: Record<string, unknown> };
      submitted: Record<string, unknown>;
      placeholders: { written: string; resolves: string; step: string | null; value: string | null; in: string[] }[];
      arraySizedBy: unknown;
      standIn: string | null;
    }
    const rendered = JSON.parse(json.stdout) as { params: Record<string, string>; steps: Step[] };
    expect(rendered.params).toEqual({ sample: 'B2' });
    const [split, align, report, notify] = rendered.steps;
    expect(split?.submitted).toEqual({ at: 'with-run', after: [], waitsFor: [], behind: [], dependency: null });
    expect(split?.placeholders).toEqual([
      expect.objectContaining({ written: '${params.sample:q}', resolves: 'trigger', value: 'B2', in: ['script'] }),
      expect.objectContaining({
        written: '${run.date}',
        resolves: 'run-made',
        value: null,
        in: ['defaults.current_working_directory'],
      }),
    ]);
    expect(split?.body.job.script).toBe('#!/bin/sh\nsplit \'B2\'\necho chunks=3 >> "$SCHEDFLOW_OUTPUTS"\n');
    expect(split?.standIn).toBeNull();
    // Where the step writes its outputs: told to its job when it is submitted.
    expect(split?.body.job.environment).toContainEqual(
      expect.stringMatching(/^SCHEDFLOW_OUTPUTS=\/shared\/lab\/\d{4}-\d\d-\d\d\/\.schedflow-outputs-<request id>$/),
    );

    // Made once split has ended: no dependency left for Slurm, its array sized by the output.
    expect(align?.submitted).toEqual({
      at: 'after-outputs',
      after: ['split'],
      waitsFor: ['steps.split.outputs.chunks'],
      behind: [],
      dependency: null,
    });
    expect(align?.arraySizedBy).toEqual({ placeholder: '${steps.split.outputs.chunks}', step: 'split' });
    expect(align?.placeholders.map((p) => [p.written, p.resolves, p.step, p.in])).toEqual([
      ['${step.name}', 'run-made', null, ['script_file align.sh']],
      ['${steps.split.outputs.chunks}', 'step-ended', 'split', ['array']],
      ['${run.date}', 'run-made', null, ['defaults.current_working_directory']],
    ]);
    expect(align?.body.job).toMatchObject({
      array: '${steps.split.outputs.chunks}',
      script: '#!/bin/sh\nalign --tag align $SLURM_ARRAY_TASK_ID\n',
    });
    expect(align?.standIn).toBe('1');

    // Uses split's output and needs align, deferred itself: made once both are done with.
    expect(report?.submitted).toEqual({
      at: 'after-outputs',
      after: ['split'],
      waitsFor: ['steps.split.outputs.sum'],
      behind: ['align'],
      dependency: 'afterok:<align>',
    });
    expect(report?.body.job).toMatchObject({
      script: '#!/bin/sh\nreport --sum ${steps.split.outputs.sum:q}\n',
      dependency: 'afterok:<align>',
    });

    // Behind a deferred step: its body is final, its dependency known once report is made.
    expect(notify?.submitted).toEqual({
      at: 'behind-deferred',
      after: [],
      waitsFor: [],
      behind: ['report'],
      dependency: 'afterok:<report>',
    });
    expect(notify?.body.job).toMatchObject({ name: 'notify-<run id>', script: "#!/bin/sh\nmail 'B2'\n" });
    expect(notify?.standIn).toBeNull();

    const text = await runCli([...args, '--text']);
    expect(text.code, text.stderr).toBe(0);
    const lines = text.stdout.split('\n');
    expect(lines[0]).toBe('pipeline fanout, profile test, slurmrestd v0.0.42, params sample=B2');
    expect(lines.filter((line) => /^(step| {2}when:| {2}array:| {2}resolves| {2}body)/.test(line))).toEqual([
      'step split',
      '  when: submitted with the run, no Slurm dependency',
      '  resolves at trigger: ${params.sample:q} = B2 (script)',
      '  resolves when the run is made: ${run.date} (defaults.current_working_directory)',
      '  body:',
      'step align',
      '  when: deferred: made once split has ended (it waits for ${steps.split.outputs.chunks}), then submitted with no Slurm dependency',
      '  array: sized when split ends, by ${steps.split.outputs.chunks}: a count N is tasks 0 to N-1 (0 skips the step, and the steps behind it go on), or an index list',
      '  resolves when the run is made: ${step.name} (script_file align.sh); ${run.date} (defaults.current_working_directory)',
      '  resolves when split ends: ${steps.split.outputs.chunks} (array)',
      '  body (step outputs as written; checked against v0.0.42 with 1 for each):',
      'step report',
      '  when: deferred: made once split has ended and align has been made (it waits for ${steps.split.outputs.sum}), then submitted with Slurm dependency afterok:<align>',
      '  resolves when the run is made: ${run.date} (defaults.current_working_directory)',
      '  resolves when split ends: ${steps.split.outputs.sum:q} (script)',
      '  body (step outputs as written; checked against v0.0.42 with 1 for each):',
      'step notify',
      '  when: deferred behind report, a step that waits for outputs: made once report has been made, then submitted with Slurm dependency afterok:<report>',
      '  resolves at trigger: ${params.sample:q} = B2 (script)',
      '  resolves when the run is made: ${run.id} (name); ${run.date} (defaults.current_working_directory)',
      '  body:',
    ]);
    expect(text.stdout).toContain('"array": "${steps.split.outputs.chunks}"');
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
