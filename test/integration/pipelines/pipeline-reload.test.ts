import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { stepRequests } from '../../../src/db/runs.js';
import { daemonTestEnv } from '../../helpers/daemon.js';
import { waitFor } from '../../helpers/http.js';

/** Pipeline files change under a running daemon: reloads, and invalid versions that change nothing. */

const env = daemonTestEnv();

const file = (echo: string, schedule = '') =>
  `${schedule}steps:\n  only:\n    script: "#!/bin/sh\\necho ${echo}\\n"\n    current_working_directory: /tmp\n`;

describe('reloading pipeline files', () => {
  it('an edit is picked up; an invalid edit is reported with its position while the loaded version keeps running', async () => {
    const sim = await env.sim();
    const td = await env.daemon(sim.url, { pipelineTickMs: 300 }, { 'p.yaml': file('one') });
    const daemon = td.daemon;
    const path = join(td.configDir, 'pipelines', 'p.yaml');
    const scriptOfRun = async () => {
      const run = await daemon.pipelines.trigger('p', { actor: 'test', trigger: 'api' });
      const [first] = await stepRequests(daemon.history.store, run.id);
      if (!first) throw new Error(`run ${run.id} has no step requests`);
      return (first.spec as { script: string }).script;
    };
    expect(await scriptOfRun()).toBe('#!/bin/sh\necho one\n');

    writeFileSync(path, file('two'));
    await waitFor(async () => ((await scriptOfRun()) === '#!/bin/sh\necho two\n' ? true : undefined), {
      what: 'the edit to be loaded',
    });

    writeFileSync(path, 'steps:\n  only:\n    script: "#!/bin/sh\\necho three\\n"\n    memory: 4G\n');
    const broken = await waitFor(async () => (await daemon.pipelines.get('p'))?.error ?? undefined, {
      what: 'the invalid edit to be reported',
    });
    expect(broken).toBe(`${path}:4:13: steps.only.memory: unknown field "memory"`);
    // Still the version loaded before.
    expect(await scriptOfRun()).toBe('#!/bin/sh\necho two\n');

    writeFileSync(path, file('four'));
    await waitFor(async () => ((await daemon.pipelines.get('p'))?.error === null ? true : undefined), {
      what: 'the fix',
    });
    expect(await scriptOfRun()).toBe('#!/bin/sh\necho four\n');
  }, 30_000);

  it('x.yaml and x.yml with one pipeline name: the daemon loads neither and reports both, as validate does', async () => {
    const sim = await env.sim();
    const td = await env.daemon(sim.url, {}, { 'x.yaml': file('yaml'), 'x.yml': file('yml'), 'y.yaml': file('y') });
    const dir = join(td.configDir, 'pipelines');
    const fix = ': give each file its own name (name:) or file name';
    expect(td.daemon.pipelines.pipeline('x')).toBeUndefined();
    expect((await td.daemon.pipelines.list()).map((p) => [p.name, p.error])).toEqual([
      ['x', `${join(dir, 'x.yaml')}: pipeline name "x" is also used by ${join(dir, 'x.yml')}${fix}`],
      ['x', `${join(dir, 'x.yml')}: pipeline name "x" is also used by ${join(dir, 'x.yaml')}${fix}`],
      ['y', null],
    ]);
  }, 30_000);

  it('a YAML alias bomb is reported by the daemon with its file and position', async () => {
    const sim = await env.sim();
    const aliases = ['a: &a [x, x, x, x, x, x, x, x, x]'];
    for (const [name, of] of [
      ['b', 'a'],
      ['c', 'b'],
      ['d', 'c'],
    ])
      aliases.push(`${name}: &${name} [${`*${of}, `.repeat(8)}*${of}]`);
    const td = await env.daemon(sim.url, {}, { 'bomb.yaml': `${aliases.join('\n')}\n${file('x')}` });
    const path = join(td.configDir, 'pipelines', 'bomb.yaml');
    expect((await td.daemon.pipelines.list()).map((p) => p.error)).toEqual([
      `${path}:2:8: aliases expand to more than 100 copies (a YAML alias bomb?): write the values out`,
    ]);
  }, 30_000);

  it('a schedule added, paused and removed changes the job schedulers accordingly', async () => {
    const sim = await env.sim();
    const td = await env.daemon(sim.url, {}, { 's.yaml': file('s') });
    const queue = td.daemon.queues.pipeline;
    const path = join(td.configDir, 'pipelines', 's.yaml');
    const schedulers = async () =>
      (await queue.getJobSchedulers())
        .filter((s) => s.key.startsWith('pipeline-'))
        .map((s) => [s.key, s.pattern, s.tz]);
    expect(await schedulers()).toEqual([]);

    writeFileSync(path, file('s', 'schedule:\n  cron: "0 5 * * *"\n  timezone: Europe/Oslo\n'));
    await waitFor(async () => ((await schedulers()).length === 1 ? true : undefined), { what: 'the schedule' });
    expect(await schedulers()).toEqual([['pipeline-s', '0 5 * * *', 'Europe/Oslo']]);
    expect((await td.daemon.pipelines.get('s'))?.schedule?.next).toHaveLength(5);

    writeFileSync(path, file('s', 'schedule:\n  cron: "0 5 * * *"\n  enabled: false\n'));
    await waitFor(async () => ((await schedulers()).length === 0 ? true : undefined), { what: 'the pause' });
    expect((await td.daemon.pipelines.get('s'))?.schedule).toMatchObject({ enabled: false, next: [] });
  }, 30_000);
});
