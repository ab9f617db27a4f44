import { writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { describe, expect, it } from 'vitest';
import { getRequest } from '../../../src/db/requests.js';
import { getRun, stepRequests } from '../../../src/db/runs.js';
import { apiClient } from '../../helpers/api.js';
import { runCli, spawnCli } from '../../helpers/cli-process.js';
import { daemonTestEnv } from '../../helpers/daemon.js';
import { waitFor } from '../../helpers/http.js';

/**
 * `schedflow runs trigger|list|show|cancel` as processes against a test daemon, and Ctrl-C
 * during a `--wait` (of `runs trigger` and `jobs submit`): the run or job goes on, and the
 * command says how to cancel it.
 */

const env = daemonTestEnv();

const pipeline = (workDir: string, script: string, params = '') =>
  [
    params,
    'defaults:',
    `  current_working_directory: ${workDir}`,
    'steps:',
    '  first:',
    `    script: "#!/bin/sh\\n${script}\\n"`,
    '  second:',
    '    needs: [first]',
    '    script: "#!/bin/sh\\ntrue\\n"',
  ].join('\n');

describe('schedflow runs', () => {
  it('trigger --wait, list, show: a run started by the CLI says so in the history, the API and the CLI', async () => {
    const sim = await env.sim();
    const td = await env.daemon(
      sim.url,
      { pipelineTickMs: 200 },
      {
        'greet.yaml': pipeline(sim.workDir, 'echo ${params.greeting}', 'params:\n  greeting: null'),
        'other.yaml': pipeline(sim.workDir, 'true'),
      },
    );
    // A process takes seconds to start on a busy machine: the default 20 s is not always enough.
    const cli = (...args: string[]) => runCli([...args, '--data-dir', td.dataDir], { timeoutMs: 60_000 });

    const started = await cli('runs', 'trigger', 'greet', '--param', 'greeting=hello', '--wait');
    expect(started.stderr).toBe('');
    expect(started.code).toBe(0);
    const runId = /^run (\S+) of greet: started\n/.exec(started.stdout)?.[1] ?? '';
    expect(runId).not.toBe('');
    expect(started.stdout).toMatch(/step first: completed, job \d+, exit 0/);
    expect(started.stdout).toMatch(/step second: completed, job \d+, exit 0/);
    expect(started.stdout).toMatch(new RegExp(`run ${runId} succeeded\\n$`));
    const run = await getRun(td.daemon.history.store, runId);
    expect(run).toMatchObject({ trigger: 'cli', params: { greeting: 'hello' }, state: 'succeeded' });
    expect(run?.triggeredBy).toMatch(/^CLI \(.+, pid \d+\)$/);

    // The API's run says how and by whom.
    const api = apiClient(td);
    const token = await api.token(['read']);
    const shownByApi = await api.call('GET', `/api/v1/runs/${runId}`, { token });
    expect(shownByApi.json).toMatchObject({ trigger: 'cli', triggered_by: run?.triggeredBy });

    const other = await cli('runs', 'trigger', 'other', '--json');
    expect(other.code, other.stderr).toBe(0);
    const otherRun = (JSON.parse(other.stdout) as { run: { id: string; state: string } }).run;
    expect(otherRun.state).toBe('running');

    const list = await cli('runs', 'list', '--pipeline', 'greet');
    expect(list.code, list.stderr).toBe(0);
    expect(list.stdout).toMatch(/^RUN\s+PIPELINE\s+TRIGGER\s+STATE/);
    expect(list.stdout).toMatch(new RegExp(`${runId}\\s+greet\\s+cli\\s+succeeded`));
    expect(list.stdout).not.toContain(otherRun.id);
    const bySate = await cli('runs', 'list', '--state', 'succeeded', '--json');
    expect((JSON.parse(bySate.stdout) as { id: string }[]).map((r) => r.id)).toContain(runId);
    const badState = await cli('runs', 'list', '--state', 'done');
    expect(badState.code).toBe(2);
    expect(badState.stderr).toMatch(/unknown state done; states are queued, running/);

    const shown = await cli('runs', 'show', runId);
    expect(shown.code, shown.stderr).toBe(0);
    expect(shown.stdout).toContain(`run       ${runId}`);
    expect(shown.stdout).toContain(`started   by the CLI (${run?.triggeredBy})`);
    expect(shown.stdout).toContain('params    greeting=hello');
    const steps = await stepRequests(td.daemon.history.store, runId);
    for (const step of steps) {
      expect(shown.stdout).toMatch(new RegExp(`${step.step}\\s+1\\s+${step.id}\\s+${step.jobId}\\s+completed\\s+0`));
    }
    const missing = await cli('runs', 'show', 'no-such-run');
    expect(missing.code).toBe(2);
    expect(missing.stderr).toMatch(/no pipeline run no-such-run in the history/);

    // What the service refuses, the CLI says, and nothing is made.
    const unknown = await cli('runs', 'trigger', 'nope');
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/^schedflow: no pipeline "nope" \(pipelines: /);
    const noParam = await cli('runs', 'trigger', 'greet');
    expect(noParam.code).toBe(2);
    expect(noParam.stderr).toMatch(/greeting/);
    const badParam = await cli('runs', 'trigger', 'greet', '--param', 'oops');
    expect(badParam.code).toBe(2);
    expect(badParam.stderr).toMatch(/"oops": expected name=value/);
  }, 120_000);

  it('Ctrl-C during runs trigger --wait and jobs submit --wait: the run and the job go on, and the command says how to cancel them', async () => {
    const sim = await env.sim();
    const td = await env.daemon(sim.url, { pipelineTickMs: 200 }, { 'slow.yaml': pipeline(sim.workDir, 'sleep 60') });
    const dataDir = resolve(td.dataDir);

    const waiting = spawnCli(['runs', 'trigger', 'slow', '--wait', '--data-dir', td.dataDir], {
      ownProcessGroup: true,
    });
    const [, runId = ''] = await waiting.waitForOutput(/^run (\S+) of slow: started\n/m, 60_000);
    await waiting.waitForOutput(/step first: running/, 30_000);
    // What Ctrl-C does in a shell: SIGINT to the foreground process group.
    process.kill(-waiting.pid, 'SIGINT');
    const exit = await waiting.exited;
    expect(exit.code).toBe(130);
    expect(waiting.stderr).toContain(
      `stopped waiting; run ${runId} goes on in the daemon. To cancel it: schedflow runs cancel ${runId} --data-dir ${dataDir}`,
    );
    expect((await getRun(td.daemon.history.store, runId))?.state).toBe('running');

    const jobFile = join(td.configDir, 'slow-job.yaml');
    writeFileSync(
      jobFile,
      ['name: slow-job', `current_working_directory: ${sim.workDir}`, 'script: "#!/bin/sh\\nsleep 60\\n"'].join('\n'),
    );
    const submitting = spawnCli(['jobs', 'submit', jobFile, '--wait', '--data-dir', td.dataDir], {
      ownProcessGroup: true,
    });
    const [, requestId = ''] = await submitting.waitForOutput(/^queued request (\S+) /m, 60_000);
    await td.waitForState(requestId, 'running', 30_000);
    await submitting.waitForOutput(/→ running/, 30_000);
    process.kill(-submitting.pid, 'SIGINT');
    expect((await submitting.exited).code).toBe(130);
    expect(submitting.stderr).toContain(
      `stopped waiting; request ${requestId} goes on in the daemon (nothing was cancelled). To cancel it: schedflow jobs cancel ${requestId} --data-dir ${dataDir}`,
    );
    expect((await getRequest(td.daemon.history.store, requestId))?.state).toBe('running');

    // The command printed cancels the run.
    const cancelled = await runCli(['runs', 'cancel', runId, '--data-dir', dataDir], { timeoutMs: 60_000 });
    expect(cancelled.code, cancelled.stderr).toBe(0);
    await waitFor(
      async () => ((await getRun(td.daemon.history.store, runId))?.state === 'cancelled' ? true : undefined),
      {
        what: `run ${runId} to be cancelled`,
        timeoutMs: 20_000,
      },
    );
  }, 120_000);
});
