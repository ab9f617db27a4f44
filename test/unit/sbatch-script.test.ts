import { describe, expect, it } from 'vitest';
import { parseBeginTime } from '../../src/sched/begin-time.js';
import { jobSpecSchema } from '../../src/sched/job-spec.js';
import { looksLikeSbatchScript, SbatchScriptError, sbatchSpec } from '../../src/sched/sbatch-script.js';
import { unwrapSubmitBody } from '../../src/sched/slurmrestd-body.js';

const spec = (lines: string, overrides?: Record<string, unknown>) =>
  sbatchSpec(`#!/bin/bash\n${lines}\necho done\n`, { defaultName: 'job.sh', overrides });

const problems = (lines: string) => {
  try {
    spec(lines);
  } catch (error) {
    if (error instanceof SbatchScriptError) return error.problems.map((p) => `${p.line}: ${p.option}: ${p.message}`);
    throw error;
  }
  throw new Error('no problem found');
};

describe('sbatch script options', () => {
  it('maps every option to its slurmrestd member, in long, long-with-space, short and short-glued forms', () => {
    const s = spec(
      [
        '#SBATCH -J a-job -p debug -A lab -q normal',
        '#SBATCH --time=1:00:00 -N 2 --ntasks 4 -c2 --mem 4G',
        '#SBATCH -o out.%j -e err.%j -D /work --array=0-9%2',
        '#SBATCH --gres=gpu:2,nic:1 --constraint=fast --exclusive',
        '#SBATCH --export=ALL,A=1,B=x\\ y --mail-type=ALL --mail-user=me@example.org',
        '#SBATCH --dependency=afterok:12 --begin=uts2000000000 --nice=-5 --requeue -H',
      ].join('\n'),
    );
    expect(s).toMatchObject({
      name: 'a-job',
      partition: 'debug',
      account: 'lab',
      qos: 'normal',
      time_limit: 60,
      nodes: '2',
      tasks: 4,
      cpus_per_task: 2,
      tres_per_task: 'cpu=2',
      memory_per_node: 4096,
      standard_output: 'out.%j',
      standard_error: 'err.%j',
      current_working_directory: '/work',
      array: '0-9%2',
      tres_per_node: 'gres/gpu:2,gres/nic:1',
      constraints: 'fast',
      shared: ['none'],
      environment: ['A=1', 'B=x y'],
      mail_type: ['INVALID_DEPENDENCY', 'BEGIN', 'END', 'FAIL', 'REQUEUE', 'STAGE_OUT'],
      mail_user: 'me@example.org',
      dependency: 'afterok:12',
      begin_time: { set: true, infinite: false, number: 2_000_000_000 },
      nice: -5,
      requeue: true,
      hold: true,
    });
    // The whole text is the script, as sbatch sends it.
    expect(s.script).toMatch(/^#!\/bin\/bash\n#SBATCH -J a-job/);
    // What it became is a spec like any other.
    expect(jobSpecSchema.parse(s)).toEqual(s);
  });

  it('reads Slurm time forms, memory units and the optional values', () => {
    const times: [string, number | 'infinite'][] = [
      ['10', 10],
      ['90:30', 91],
      ['1:02:03', 63],
      ['2-3', 51 * 60],
      ['2-3:15', 51 * 60 + 15],
      ['1-0:0:30', 24 * 60 + 1],
      ['UNLIMITED', 'infinite'],
    ];
    for (const [given, minutes] of times) expect(spec(`#SBATCH -t ${given}`).time_limit, given).toBe(minutes);
    for (const [given, mb] of [
      ['512', 512],
      ['2048K', 2],
      ['3M', 3],
      ['2G', 2048],
      ['1T', 1024 * 1024],
    ] as const) {
      expect(spec(`#SBATCH --mem=${given}`).memory_per_node, given).toBe(mb);
    }
    expect(spec('#SBATCH --mem-per-cpu=1G').memory_per_cpu).toEqual({ set: true, infinite: false, number: 1024 });
    expect(spec('#SBATCH --nice').nice).toBe(100);
    expect(spec('#SBATCH --exclusive=user').shared).toEqual(['user']);
    expect(spec('#SBATCH --no-requeue').requeue).toBe(false);
    expect(spec('#SBATCH --export=NONE').environment).toEqual([]);
    expect(spec('#SBATCH --mail-type=FAIL,TIME_LIMIT_80,INVALID_DEPEND').mail_type).toEqual([
      'FAIL',
      'TIME=80%',
      'INVALID_DEPENDENCY',
    ]);
    expect(spec('#SBATCH --gres=none').tres_per_node).toBeUndefined();
    expect(spec('#SBATCH -HN1-3').nodes).toBe('1-3');
  });

  it('stops at the first command, reads #SLURM, skips comments and blank lines, and a later option wins', () => {
    const s = sbatchSpec(
      '#!/bin/sh\n\n# a comment\n  # indented comment\n#SBATCH -t 5\n#SLURM -t 6 # trailing comment\n  #SBATCH -t 7\necho hi\n#SBATCH -t 8\n',
      { defaultName: 'run.sh' },
    );
    expect(s.time_limit).toBe(6);
    expect(s.name).toBe('run.sh');
    expect(spec('#SBATCH -J "two words" --comment=\'a # not a comment\'')).toMatchObject({
      name: 'two words',
      comment: 'a # not a comment',
    });
  });

  it('overrides take precedence, and -c keeps its TRES per task in step', () => {
    const s = spec('#SBATCH -J from-script -t 5 -c 2', { time_limit: 30, cpus_per_task: 4 });
    expect(s).toMatchObject({ name: 'from-script', time_limit: 30, cpus_per_task: 4, tres_per_task: 'cpu=4' });
  });

  it('refuses what it does not know, each problem with its line and the option as written', () => {
    expect(problems('#SBATCH --tme=5 -Z\n#SBATCH --parsable')).toEqual([
      '2: --tme: not an sbatch option schedflow reads from a script; did you mean --time? (the options it reads: docs/profiles.md#sbatch-scripts)',
      '2: -Z: not an sbatch option schedflow reads from a script (the options it reads: docs/profiles.md#sbatch-scripts)',
      '3: --parsable: not an sbatch option schedflow reads from a script (the options it reads: docs/profiles.md#sbatch-scripts)',
    ]);
    expect(problems('#SBATCH -n\n')).toEqual(['2: -n: needs a value']);
    expect(problems('#SBATCH --hold=yes')).toEqual(['2: --hold: takes no value']);
    expect(problems('#SBATCH extra')).toEqual(['2: null: "extra" is not an option (sbatch: "Invalid directive")']);
    expect(problems('#SBATCH -J "open')).toEqual(['2: null: unmatched double quote (")']);
    expect(problems('#SBATCH --export=HOME')[0]).toMatch(/^2: --export: "HOME" names a variable without a value/);
    expect(problems('#SBATCH --mail-type=SOMETIMES')[0]).toMatch(/^2: --mail-type: "SOMETIMES" is not a mail type/);
    expect(problems('#SBATCH --exclusive=maybe')[0]).toMatch(/is not an --exclusive mode/);
    expect(problems('#SBATCH -N lots')[0]).toMatch(/^2: -N: "lots" is not a node count/);
    expect(problems('#SBATCH --begin=someday')[0]).toMatch(/^2: --begin: "someday" is not a Slurm time/);
    expect(problems('#SBATCH hetjob')[0]).toMatch(/^2: hetjob: a heterogeneous job/);
    // The spec's own checks, at the line that set the member.
    expect(problems('#SBATCH -t 1:00\n#SBATCH --array=9-1 --mem=lots')).toEqual([
      '3: --mem: "lots" is not a memory size (e.g. 512, 512M, 4G)',
      '3: --array: the range "9-1" ends before it starts',
    ]);
    expect(() => sbatchSpec('#SBATCH -t 5\necho\n', { defaultName: 'x' })).toThrow(/^line 1: the script must start/);
  });

  it('tells a script from YAML or JSON by its content', () => {
    expect(looksLikeSbatchScript('#!/bin/sh\necho\n')).toBe(true);
    expect(looksLikeSbatchScript('# a job\n#SBATCH -t 5\n')).toBe(true);
    expect(looksLikeSbatchScript('name: x\nscript: "#!/bin/sh"\n')).toBe(false);
    expect(looksLikeSbatchScript('{"name": "x"}')).toBe(false);
  });
});

describe('--begin times', () => {
  // 2030-06-15 10:00:00 local time
  const now = new Date(2030, 5, 15, 10, 0, 0);
  const local = (...parts: [number, number, number, number?, number?, number?]) =>
    Math.floor(new Date(parts[0], parts[1], parts[2], parts[3] ?? 0, parts[4] ?? 0, parts[5] ?? 0).getTime() / 1000);
  it('reads the forms sbatch takes', () => {
    const cases: [string, number][] = [
      ['now', local(2030, 5, 15, 10)],
      ['now+60', local(2030, 5, 15, 10, 1)],
      ['now+2hours', local(2030, 5, 15, 12)],
      ['now+1day', local(2030, 5, 16, 10)],
      ['16:00', local(2030, 5, 15, 16)],
      ['09:30', local(2030, 5, 16, 9, 30)], // passed today: tomorrow
      ['teatime', local(2030, 5, 15, 16)],
      ['midnight', local(2030, 5, 16)],
      ['tomorrow', local(2030, 5, 16)],
      ['2031-01-02', local(2031, 0, 2)],
      ['2031-01-02T03:04:05', local(2031, 0, 2, 3, 4, 5)],
      ['12/24', local(2030, 11, 24)],
      ['01/02/31', local(2031, 0, 2)],
      ['01/02', local(2031, 0, 2)], // passed this year: next year's
    ];
    for (const [text, expected] of cases) expect(parseBeginTime(text, now), text).toBe(expected);
    expect(() => parseBeginTime('now+3fortnights', now)).toThrow(/not a Slurm time/);
    expect(() => parseBeginTime('25:00', now)).toThrow(/not a Slurm time/);
  });
});

describe("slurmrestd's submit body and number objects", () => {
  it('unwraps {job}, a one-job {jobs}, and takes a top-level script', () => {
    expect(unwrapSubmitBody({ job: { name: 'a' }, script: '#!/bin/sh' })).toEqual({ name: 'a', script: '#!/bin/sh' });
    expect(unwrapSubmitBody({ jobs: [{ name: 'a', script: 'x' }] })).toEqual({ name: 'a', script: 'x' });
    const het = { jobs: [{ name: 'a' }, { name: 'b' }] };
    expect(unwrapSubmitBody(het)).toBe(het);
    const plain = { name: 'a', job: 'not a wrapper' };
    expect(unwrapSubmitBody(plain)).toBe(plain);
  });

  it('takes {set, number, infinite} for time_limit and memory_per_node, and says what to write for the rest', () => {
    const base = { name: 'x', script: '#!/bin/sh\n' };
    expect(
      jobSpecSchema.parse({
        ...base,
        time_limit: { set: true, infinite: false, number: 30 },
        memory_per_node: { set: true, number: 512 },
      }),
    ).toMatchObject({ time_limit: 30, memory_per_node: 512 });
    expect(jobSpecSchema.parse({ ...base, time_limit: { infinite: true } }).time_limit).toBe('infinite');
    const refused = jobSpecSchema.safeParse({
      ...base,
      time_limit: { set: false },
      memory_per_node: { infinite: true },
      job: { name: 'y' },
    });
    expect(refused.error?.issues.map((i) => `${i.path.join('.')}: ${i.message}`)).toEqual([
      'memory_per_node: {"infinite": true}: there is no unlimited memory; give a number of MB or leave it out',
      'time_limit: {"set": false} leaves it unset: leave the member out instead',
      `job: "job" is slurmrestd's submit body around a job: write its members (name, script, time_limit, …) at the top of the spec instead`,
    ]);
  });
});
