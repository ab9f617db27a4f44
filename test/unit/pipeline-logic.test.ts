import { describe, expect, it } from 'vitest';
import type { JobRequestRow } from '../../src/db/schema.js';
import { parseDuration } from '../../src/lib/duration.js';
import { missedFireTimes, nextFireTimes } from '../../src/pipelines/cron-times.js';
import { render, shellQuote, TemplateError, unknownPlaceholders } from '../../src/pipelines/param-substitution.js';
import type { StepPlan } from '../../src/pipelines/run-plan.js';
import { latestAttempts, resolveDependencies, retryPending } from '../../src/pipelines/step-dependencies.js';

describe('templates', () => {
  const context = { run: { id: 'r1' }, params: { sample: 'A1' } };

  it('fills dotted names and leaves a shell ${VAR} alone', () => {
    expect(render('echo ${params.sample} ${ run.id } ${HOME} $PATH', context)).toBe('echo A1 r1 ${HOME} $PATH');
  });

  it('an unknown dotted name is an error, never an empty string', () => {
    expect(() => render('${params.other}', context)).toThrow(TemplateError);
    expect(() => render('${params.other}', context)).toThrow('unknown template name ${params.other}');
  });

  it(':q pastes a value as one single-quoted shell word, embedded quotes included; the plain form pastes it as is', () => {
    const hostile = { params: { v: `"; touch pwned; echo "it's` } };
    expect(render('echo ${params.v:q}', hostile)).toBe(`echo '"; touch pwned; echo "it'\\''s'`);
    expect(render('echo ${ params.v:q }', { params: { v: '' } })).toBe("echo ''");
    expect(render('echo "${params.v}"', hostile)).toBe(`echo ""; touch pwned; echo "it's"`);
    expect(shellQuote("a'b")).toBe("'a'\\''b'");
  });

  it('an unknown modifier is an error, never passed to the shell', () => {
    expect(() => render('${params.sample:x}', context)).toThrow('unknown template name ${params.sample:x}');
    expect(unknownPlaceholders('${params.a:q} ${params.a:} ${params.a:Q}', new Set(['a']))).toEqual([
      'params.a:',
      'params.a:Q',
    ]);
  });

  it('lists the names a file may not use', () => {
    expect(
      unknownPlaceholders('${params.a} ${params.b} ${run.date} ${run.nope} ${x.y} ${HOME}', new Set(['a'])),
    ).toEqual(['params.b', 'run.nope', 'x.y']);
  });
});

describe('durations', () => {
  it.each([
    [90, 90],
    ['90', 90],
    ['90s', 90],
    ['30m', 1800],
    ['2h', 7200],
    ['1d', 86_400],
    ['1h30m', 5400],
  ])('%s is %i s', (text, seconds) => {
    expect(parseDuration(text)).toBe(seconds);
  });

  it.each(['', '5x', '-1m', 'soon'])('%j is refused', (text) => {
    expect(() => parseDuration(text)).toThrow(/is not a (positive )?duration/);
  });
});

describe('cron times', () => {
  const t0 = Date.UTC(2026, 10, 22, 0, 0, 0);

  it('reads the expression in its time zone', () => {
    expect(nextFireTimes('0 2 * * *', 'Europe/Berlin', t0, 2).map((t) => new Date(t).toISOString())).toEqual([
      '2026-11-22T01:00:00.000Z',
      '2026-11-23T01:00:00.000Z',
    ]);
  });

  it('six fields: seconds first', () => {
    expect(nextFireTimes('*/20 * * * * *', 'UTC', t0, 3).map((t) => (t - t0) / 1000)).toEqual([20, 40, 60]);
  });

  it('missed ticks: the last ones up to the limit, and how many there were', () => {
    const missed = missedFireTimes('*/10 * * * *', 'UTC', t0, t0 + 3600_000, 2);
    expect(missed.total).toBe(6);
    expect(missed.times.map((t) => (t - t0) / 60_000)).toEqual([50, 60]);
    expect(missedFireTimes('*/10 * * * *', 'UTC', t0, t0 + 5 * 60_000, 3)).toEqual({ times: [], total: 0 });
  });
});

describe('step dependencies', () => {
  let n = 0;
  const row = (step: string, fields: Partial<JobRequestRow>): JobRequestRow =>
    ({ id: `r${n++}`, step, attempt: 1, state: 'queued', jobId: null, createdAt: n, ...fields }) as JobRequestRow;
  const plan = (step: string, retry: StepPlan['retry'] = null) => [step, { step, retry } as StepPlan] as const;
  const plans = new Map([plan('a', { on: ['node_fail'], limit: 1 }), plan('b')]);

  it('waits while a needed step has no job id, then depends on its job', () => {
    const waiting = latestAttempts([row('a', { state: 'submitting' })]);
    expect(resolveDependencies([{ step: 'a', type: 'afterok' }], waiting, plans)).toEqual({ kind: 'wait', on: 'a' });
    const submitted = latestAttempts([
      row('a', { state: 'pending', jobId: 41 }),
      row('b', { state: 'running', jobId: 42 }),
    ]);
    expect(
      resolveDependencies(
        [
          { step: 'a', type: 'afterok' },
          { step: 'b', type: 'afterany' },
        ],
        submitted,
        plans,
      ),
    ).toEqual({ kind: 'ready', dependency: 'afterok:41,afterany:42' });
  });

  it('decides an ended step locally: success satisfies afterok, failure makes it impossible', () => {
    const done = latestAttempts([row('b', { state: 'completed', jobId: 7 })]);
    expect(resolveDependencies([{ step: 'b', type: 'afterok' }], done, plans)).toEqual({
      kind: 'ready',
      dependency: null,
    });
    expect(resolveDependencies([{ step: 'b', type: 'afternotok' }], done, plans)).toMatchObject({ kind: 'never' });
    const failed = latestAttempts([row('b', { state: 'failed', jobId: 7 })]);
    expect(resolveDependencies([{ step: 'b', type: 'afterok' }], failed, plans)).toEqual({
      kind: 'never',
      detail: 'step "b" ended FAILED, and this step needs it to succeed (afterok)',
    });
    expect(resolveDependencies([{ step: 'b', type: 'afterany' }], failed, plans)).toEqual({
      kind: 'ready',
      dependency: null,
    });
  });

  it('a failure the step will be retried on is waited out; the newest attempt counts', () => {
    const first = row('a', { state: 'node_fail', jobId: 7 });
    expect(retryPending(first, plans.get('a'))).toBe(true);
    expect(resolveDependencies([{ step: 'a', type: 'afterok' }], latestAttempts([first]), plans)).toEqual({
      kind: 'wait',
      on: 'a',
    });
    const second = row('a', { state: 'running', jobId: 8, attempt: 2 });
    expect(retryPending(second, plans.get('a'))).toBe(false);
    expect(resolveDependencies([{ step: 'a', type: 'afterok' }], latestAttempts([second, first]), plans)).toEqual({
      kind: 'ready',
      dependency: 'afterok:8',
    });
    const secondFailed = { ...second, state: 'node_fail' as const };
    expect(retryPending(secondFailed, plans.get('a'))).toBe(false);
  });
});
