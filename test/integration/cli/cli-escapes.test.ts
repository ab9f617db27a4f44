import { describe, expect, it } from 'vitest';
import type { JobSpec } from '../../../src/sched/job-spec.js';
import { runCli } from '../../helpers/cli-process.js';
import { daemonTestEnv } from '../../helpers/daemon.js';

/**
 * What the CLI prints of a job (its name, its output) is the job author's text: a terminal must
 * not obey the escape sequences in it (issue 30, point 6). The built `schedflow` against a daemon
 * whose job is named and writes with escape sequences: a window-title change (OSC 0, ended by
 * BEL) and a clear-screen (CSI 2J).
 */

const env = daemonTestEnv();

const TITLE = '\x1b]0;pwned\x07';
const CLEAR = '\x1b[2J';
// Any control character but the newline and tab a table or an output needs.
// biome-ignore lint/suspicious/noControlCharactersInRegex: looking for them is the point.
const CONTROL = /[\x00-\x08\x0b-\x1f\x7f-\x9f]/;

describe('schedflow jobs prints names and output with their control characters escaped', () => {
  it('in list, show and output; as they are with --raw; --json stays JSON', async () => {
    const sim = await env.sim();
    const td = await env.daemon(sim.url);
    const spec = {
      name: `evil${TITLE}${CLEAR}`,
      current_working_directory: sim.workDir,
      standard_output: 'evil-%j.out',
      script: `#!/bin/sh\nprintf 'before${CLEAR.replace('\x1b', '\\033')}after\\tcol\\n${TITLE.replace('\x1b', '\\033').replace('\x07', '\\007')}\\n'\n`,
    } as JobSpec;
    const id = await td.daemon.submit({ spec, owner: 'default', actor: 'test', origin: 'api' });
    await td.waitForState(id, 'completed');
    const at = ['--data-dir', td.dataDir];

    const list = await runCli(['jobs', 'list', ...at]);
    expect(list.code, list.stderr).toBe(0);
    expect(list.stdout).not.toMatch(CONTROL);
    expect(list.stdout).toContain('evil\\x1b]0;pwned\\x07\\x1b[2J');

    const show = await runCli(['jobs', 'show', id, ...at]);
    expect(show.code, show.stderr).toBe(0);
    expect(show.stdout).not.toMatch(CONTROL);
    expect(show.stdout).toContain('name      evil\\x1b]0;pwned\\x07\\x1b[2J (profile');

    const output = await runCli(['jobs', 'output', id, ...at]);
    expect(output.code, output.stderr).toBe(0);
    expect(output.stdout).not.toMatch(CONTROL);
    // Newlines and tabs are kept: the output still reads as lines and columns.
    expect(output.stdout).toBe('before\\x1b[2Jafter\tcol\n\\x1b]0;pwned\\x07\n');

    const raw = await runCli(['jobs', 'output', id, '--raw', ...at]);
    expect(raw.code, raw.stderr).toBe(0);
    expect(raw.stdout).toBe(`before${CLEAR}after\tcol\n${TITLE}\n`);

    const json = await runCli(['jobs', '--json', 'list', ...at]);
    expect(json.code, json.stderr).toBe(0);
    expect(json.stdout).not.toMatch(CONTROL);
    const rows = JSON.parse(json.stdout) as { id: string; name: string }[];
    expect(rows.find((r) => r.id === id)?.name).toBe(spec.name);
  });
});
