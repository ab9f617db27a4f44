import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { basename, dirname, join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { SourceError } from '../../src/lib/yaml-source.js';
import { loadPipelineFile } from '../../src/pipelines/pipeline-loader.js';
import { planRun } from '../../src/pipelines/run-plan.js';
import { parseProfile } from '../../src/sched/profile.js';

const dir = mkdtempSync(join(tmpdir(), 'schedflow-pipelines-'));
// A proxy token, bound to its account (a MUNGE or plain-slurmrestd profile's account is a default).
const profiles = new Map([
  ['lab', parseProfile('lab', { url: 'http://127.0.0.1:1', auth: { type: 'bearer', tokenEnv: 'T' }, account: 'lab' })],
]);

/** The problems of a pipeline file's text, one string each (`file:line:col: …` without the folder). */
function problems(text: string, name = 'p.yaml'): string[] {
  const file = join(dir, name);
  writeFileSync(file, text);
  try {
    loadPipelineFile(file, { profiles, defaultProfile: 'lab' });
  } catch (error) {
    if (error instanceof SourceError) return error.problems.map((p) => p.replace(`${dir}/`, ''));
    throw error;
  }
  return [];
}

const step = '  a:\n    script: "#!/bin/sh\\ntrue\\n"\n';

describe('pipeline files: problems say where and what', () => {
  it('a valid file has none', () => {
    expect(problems(`steps:\n${step}`)).toEqual([]);
  });

  it('invalid YAML: an unclosed flow sequence or quote is pointed at where it opens, not at the end of the file', () => {
    expect(problems('steps:\n  a: [unclosed\n')).toEqual([expect.stringMatching(/^p\.yaml:2:6: Flow sequence/)]);
    const quote = 'steps:\n  a:\n    script: "#!/bin/sh\n    name: x\n  b:\n    script: y\n';
    expect(problems(quote)).toEqual(['p.yaml:3:13: Missing closing "quote']);
  });

  it('a YAML alias bomb is refused with where its aliases start, not expanded', () => {
    const bomb = [
      'a: &a ["x","x","x","x","x","x","x","x","x"]',
      'b: &b [*a,*a,*a,*a,*a,*a,*a,*a,*a]',
      'c: &c [*b,*b,*b,*b,*b,*b,*b,*b,*b]',
      'd: &d [*c,*c,*c,*c,*c,*c,*c,*c,*c]',
      `steps:\n${step}`,
    ].join('\n');
    expect(problems(bomb)).toEqual([
      'p.yaml:2:8: aliases expand to more than 100 copies (a YAML alias bomb?): write the values out',
    ]);
  });

  it('a cron expression with the wrong number of fields, and an invalid one', () => {
    expect(problems(`schedule:\n  cron: "* * *"\nsteps:\n${step}`)).toEqual([
      'p.yaml:2:9: schedule.cron: a cron expression has 5 or 6 fields, this one has 3',
    ]);
    expect(problems(`schedule:\n  cron: "61 * * * *"\nsteps:\n${step}`)).toEqual([
      'p.yaml:2:9: schedule.cron: invalid cron expression: Constraint error, got value 61 expected range 0-59',
    ]);
  });

  it('an unknown time zone', () => {
    expect(problems(`schedule:\n  cron: "0 2 * * *"\n  timezone: Mars/Olympus\nsteps:\n${step}`)).toEqual([
      'p.yaml:3:13: schedule.timezone: not a time zone (use an IANA name such as Europe/Berlin or UTC)',
    ]);
  });

  it('an unknown field, pointed at itself', () => {
    expect(problems(`steps:\n  a:\n    script: "#!/bin/sh\\ntrue\\n"\n    cpus: 4\n`)).toEqual([
      'p.yaml:4:11: steps.a.cpus: unknown field "cpus"',
    ]);
  });

  it('an account other than the one the profile token is bound to', () => {
    expect(problems(`steps:\n${step}    account: physics\n`)).toEqual([
      'p.yaml:4:14: steps.a.account: account "physics" differs from the account "lab" that profile "lab"\'s token is bound to; the scheduler would refuse the submission (403): use "lab" or leave account out',
    ]);
  });

  it("another account than a profile's default where no token binds it: Slurm's associations decide, at run creation", () => {
    const file = join(dir, 'munge.yaml');
    writeFileSync(file, `steps:\n${step}    account: physics\n`);
    const munge = parseProfile('munge', { url: 'http://127.0.0.1:1', auth: { type: 'munge' }, account: 'lab' });
    expect(() =>
      loadPipelineFile(file, { profiles: new Map([['munge', munge]]), defaultProfile: 'munge' }),
    ).not.toThrow();
  });

  it('needs naming a missing step, and a cycle', () => {
    expect(problems(`steps:\n${step}    needs: [b]\n`)).toEqual(['p.yaml:4:13: steps.a.needs: no step "b" (steps: a)']);
    // Looked up among the steps only, not among an object's inherited members.
    expect(problems(`steps:\n${step}    needs: [toString]\n`)).toEqual([
      'p.yaml:4:13: steps.a.needs: no step "toString" (steps: a)',
    ]);
    const cycle = `steps:\n${step}    needs: [b]\n  b:\n    script: "#!/bin/sh\\n"\n    needs: [a]\n`;
    expect(problems(cycle)).toEqual(['p.yaml:2:3: steps: the needs of a, b form a cycle']);
  });

  it('unknown template names, while a shell ${VAR} is left alone', () => {
    const text =
      'params:\n  sample: A1\nsteps:\n  a:\n    script: "#!/bin/sh\\necho ${HOME} ${params.sample} ${params.nope} ${run.idx}\\n"\n';
    expect(problems(text)).toEqual([
      'p.yaml:5:13: steps.a.script: unknown template name ${params.nope} (known: run.id, run.scheduled_time, run.date, run.trigger, pipeline.name, step.name, params.sample; :q after a name shell-quotes it)',
      'p.yaml:5:13: steps.a.script: unknown template name ${run.idx} (known: run.id, run.scheduled_time, run.date, run.trigger, pipeline.name, step.name, params.sample; :q after a name shell-quotes it)',
    ]);
  });

  it('a script without an interpreter line, and a missing script file', () => {
    expect(problems('steps:\n  a:\n    script: "echo hi"\n')).toEqual([
      'p.yaml:2:3: steps.a.script: the script must start with an interpreter line such as #!/bin/bash',
    ]);
    expect(problems('steps:\n  a:\n    script_file: missing.sh\n')).toEqual([
      `p.yaml:3:18: steps.a.script_file: cannot read ${dir}/missing.sh`,
    ]);
  });

  it('a script_file outside the pipelines folder is refused: ../, an absolute path, a symlink pointing out', () => {
    // A valid script one folder up, so only the confinement can refuse it.
    const outside = join(dirname(dir), `outside-${basename(dir)}.sh`);
    writeFileSync(outside, '#!/bin/sh\necho secret\n');
    rmSync(join(dir, 'link.sh'), { force: true });
    symlinkSync(outside, join(dir, 'link.sh'));
    const refused = `is outside the pipelines folder ${dir}: keep scripts in it`;
    expect(problems(`steps:\n  a:\n    script_file: ../${basename(outside)}\n`)).toEqual([
      `p.yaml:3:18: steps.a.script_file: ../${basename(outside)} ${refused}`,
    ]);
    expect(problems(`steps:\n  a:\n    script_file: ${outside}\n`)).toEqual([
      `p.yaml:3:18: steps.a.script_file: ${outside} ${refused}`,
    ]);
    expect(problems('steps:\n  a:\n    script_file: link.sh\n')).toEqual([
      `p.yaml:3:18: steps.a.script_file: link.sh (it resolves to ${outside}) ${refused}`,
    ]);
    // Inside the folder, through a subfolder and a symlink that stays inside: fine.
    mkdirSync(join(dir, 'scripts'), { recursive: true });
    writeFileSync(join(dir, 'scripts', 'ok.sh'), '#!/bin/sh\necho ok\n');
    rmSync(join(dir, 'inside.sh'), { force: true });
    symlinkSync(join(dir, 'scripts', 'ok.sh'), join(dir, 'inside.sh'));
    expect(problems('steps:\n  a:\n    script_file: scripts/ok.sh\n  b:\n    script_file: inside.sh\n')).toEqual([]);
  });

  it('a script file swapped for a symlink out after the load is refused when a run is made', () => {
    const file = join(dir, 'swap.yaml');
    writeFileSync(join(dir, 'swap.sh'), '#!/bin/sh\necho fine\n');
    writeFileSync(file, 'steps:\n  a:\n    script_file: swap.sh\n');
    const loaded = loadPipelineFile(file, { profiles, defaultProfile: 'lab' });
    rmSync(join(dir, 'swap.sh'));
    symlinkSync('/etc/passwd', join(dir, 'swap.sh'));
    const input = { runId: 'r', trigger: 'api', createdAt: 0, scheduledFor: null, params: {} } as const;
    expect(() => planRun(loaded, input)).toThrow(
      `steps.a.script_file: swap.sh (it resolves to /etc/passwd) is outside the pipelines folder ${dir}: keep scripts in it`,
    );
  });

  it('an unknown profile names the configured ones', () => {
    expect(problems(`defaults:\n  profile: other\nsteps:\n${step}`)).toEqual([
      'p.yaml:2:12: defaults.profile: no scheduler profile "other" (configured: lab)',
    ]);
  });
});

describe('run plans: step outputs', () => {
  it("a parameter's value cannot make a step use another step's outputs", () => {
    const file = join(dir, 'inject.yaml');
    writeFileSync(
      file,
      [
        'params:',
        '  sample: x',
        'defaults:',
        '  current_working_directory: /tmp',
        'steps:',
        '  a:',
        '    script: "#!/bin/sh\\necho a=1 >> \\"$SCHEDFLOW_OUTPUTS\\"\\n"',
        '  b:',
        '    needs: [a]',
        '    script: "#!/bin/sh\\necho ${params.sample} ${steps.a.outputs.a}\\n"',
        '',
      ].join('\n'),
    );
    const loaded = loadPipelineFile(file, { profiles, defaultProfile: 'lab' });
    const plan = (sample: string) =>
      planRun(loaded, { runId: 'r', trigger: 'api', createdAt: 0, scheduledFor: null, params: { sample } });
    expect(plan('plain').steps[1]?.deferred?.uses).toEqual([{ step: 'a', name: 'a' }]);
    for (const sample of ['${steps.nosuch.outputs.x}', '${steps.a.outputs.other}', '${ steps.a.outputs.a }']) {
      expect(() => plan(sample)).toThrow(
        "steps.b: a parameter's or upstream output's value holds ${steps.<step>.outputs.<name>}: step outputs are used only where the pipeline file writes them",
      );
    }
  });
});

describe('run plans: deadlines', () => {
  it("the run's max_pending bounds every step's wait, a step's own wins; start_by stays with the run", () => {
    const file = join(dir, 'deadlines.yaml');
    writeFileSync(
      file,
      [
        'deadlines: { max_pending: 30m, start_by: 1h }',
        'steps:',
        '  a:',
        '    script: "#!/bin/sh\\ntrue\\n"',
        '  b:',
        '    script: "#!/bin/sh\\ntrue\\n"',
        '    deadlines: { max_pending: 5m, finish_by: 2h }',
        '',
      ].join('\n'),
    );
    const createdAt = Date.parse('2026-11-22T08:00:00Z');
    const plan = planRun(loadPipelineFile(file, { profiles, defaultProfile: 'lab' }), {
      runId: 'r1',
      trigger: 'api',
      createdAt,
      scheduledFor: null,
      params: {},
    });
    const [a, b] = plan.steps;
    expect(a?.deadlines).toEqual({ maxPendingSec: 1800 });
    expect(b?.deadlines).toEqual({ maxPendingSec: 300, finishBy: createdAt + 2 * 3600_000 });
    expect(plan.deadlines).toEqual({ maxPendingSec: 1800, startBy: createdAt + 3600_000 });
  });
});

describe('a step retry policy', () => {
  it('keeps { on, limit } valid, and says where a policy is wrong or cannot serve its step', () => {
    expect(problems(`steps:\n${step}    retry: { on: [NODE_FAIL], limit: 2 }\n`)).toEqual([]);
    const full =
      '    memory_per_node: 4G\n    retry:\n      on: [OUT_OF_MEMORY, FAILED]\n      exit_codes: [75]\n      limit: 3\n      backoff: { delay: 1m, factor: 2, max: 10m }\n      escalate: { memory_per_node: { factor: 2, max: 16G } }\n';
    expect(problems(`steps:\n${step}${full}`)).toEqual([]);
    expect(problems(`steps:\n${step}    retry: { on: [TIMEOUT], limit: 1, exit_codes: [3] }\n`)).toEqual([
      expect.stringMatching(
        /^p\.yaml:\d+:\d+: steps\.a\.retry\.exit_codes: exit_codes is about FAILED: add FAILED to on/,
      ),
    ]);
    const noMemory =
      '    retry: { on: [OUT_OF_MEMORY], limit: 1, escalate: { memory_per_node: { factor: 2, max: 8G } } }\n';
    expect(problems(`steps:\n${step}${noMemory}`).join('\n')).toContain(
      "steps.a.retry.escalate.memory_per_node grows the job's memory_per_node: set memory_per_node",
    );
  });

  it('refuses CANCELLED in on, which pipelines took before, saying why and what to do', () => {
    expect(problems(`steps:\n${step}    retry: { on: [NODE_FAIL, CANCELLED], limit: 2 }\n`)).toEqual([
      expect.stringMatching(
        /^p\.yaml:\d+:\d+: steps\.a\.retry\.on\.1: CANCELLED is never retried: .* remove it from on$/,
      ),
    ]);
  });
});
