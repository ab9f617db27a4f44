import { readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { apiClient, errorOf } from '../../helpers/api.js';
import { runCli } from '../../helpers/cli-process.js';
import { daemonTestEnv } from '../../helpers/daemon.js';

/**
 * sbatch scripts as job files, on the simulator: `schedflow jobs submit job.sh`, `schedflow
 * validate --render job.sh` and `POST /api/v1/jobs` with `sbatch`; slurmrestd's own submit body
 * and `{set, number, infinite}` numbers taken as a spec; each mistake said with its line.
 */

const env = daemonTestEnv();

interface Detail {
  state: string;
  spec: Record<string, unknown>;
  output: { stdout: string | null };
}

const script = (workDir: string, name: string) => `#!/bin/sh
# sbatch reads the options up to the first command
#SBATCH -J ${name} -t 1:30 --mem=64M
#SBATCH --export=NONE,GREETING=hi -D ${workDir}
#SBATCH -o ${name}-%j.out
echo "$GREETING from $SLURM_JOB_NAME"
#SBATCH --time=99
`;

describe('sbatch scripts as job files', () => {
  it('schedflow jobs submit runs a script by its #SBATCH lines; validate --render shows its spec; mistakes name the line', async () => {
    const sim = await env.sim();
    const td = await env.daemon(sim.url);
    const file = join(sim.workDir, 'job.sh');
    writeFileSync(file, script(sim.workDir, 'sf-cli-sbatch'));

    const rendered = await runCli(['validate', '--render', file]);
    expect(rendered.code).toBe(0);
    expect(JSON.parse(rendered.stdout)).toMatchObject({
      file,
      spec: {
        name: 'sf-cli-sbatch',
        time_limit: 2,
        memory_per_node: 64,
        environment: ['GREETING=hi'],
        current_working_directory: sim.workDir,
        standard_output: 'sf-cli-sbatch-%j.out',
      },
    });
    const checked = await runCli(['validate', file]);
    expect(checked.stdout).toBe(`ok  ${file}  job script: sf-cli-sbatch\n`);

    const submitted = await runCli(['jobs', 'submit', file, '--wait', '--json', '--data-dir', td.dataDir], {
      timeoutMs: 60_000,
    });
    expect(submitted.stderr).toBe('');
    expect(submitted.code).toBe(0);
    const { requestId } = JSON.parse(submitted.stdout.split('\n')[0] ?? '{}') as { requestId: string };
    const api = apiClient(td);
    const token = await api.token(['read']);
    const detail = (await api.call('GET', `/api/v1/jobs/${requestId}`, { token })).json as Detail;
    expect(detail.state).toBe('completed');
    expect(detail.spec).toMatchObject({ name: 'sf-cli-sbatch', time_limit: 2 });
    expect(readFileSync(detail.output.stdout ?? '', 'utf8')).toBe('hi from sf-cli-sbatch\n');

    // Every mistake at once, each with its line and option; nothing queued.
    const bad = join(sim.workDir, 'bad.sh');
    writeFileSync(bad, '#!/bin/sh\n#SBATCH --tme=5 -n x\n#SBATCH --export=HOME --array=5-1\ntrue\n');
    const refused = await runCli(['jobs', 'submit', bad, '--data-dir', td.dataDir]);
    expect(refused.code).toBe(2);
    expect(refused.stderr).toContain(
      `${bad}:2: --tme: not an sbatch option schedflow reads from a script; did you mean --time?`,
    );
    expect(refused.stderr).toContain(`${bad}:2: -n: expects a number of tasks, got "x"`);
    expect(refused.stderr).toContain(`${bad}:3: --export: "HOME" names a variable without a value`);
    expect(refused.stderr).toContain(`${bad}:3: --array: the range "5-1" ends before it starts`);
    const invalid = await runCli(['validate', bad]);
    expect(invalid.code).toBe(2);
    expect(invalid.stderr).toMatch(/1 invalid file\n$/);

    // slurmrestd's submit body, with its number objects, is a job file too.
    const body = join(sim.workDir, 'slurmrestd.json');
    writeFileSync(
      body,
      JSON.stringify({
        script: '#!/bin/sh\necho from a slurmrestd body\n',
        job: {
          name: 'sf-restd-body',
          current_working_directory: sim.workDir,
          time_limit: { set: true, infinite: false, number: 5 },
          environment: ['PATH=/bin:/usr/bin'],
        },
      }),
    );
    const wrapped = await runCli(['jobs', 'submit', body, '--wait', '--data-dir', td.dataDir], { timeoutMs: 60_000 });
    expect(wrapped.stderr).toBe('');
    expect(wrapped.code).toBe(0);
  }, 90_000);

  it('POST /api/v1/jobs takes an sbatch script, with spec members on top; a mistake names the line', async () => {
    const sim = await env.sim();
    const td = await env.daemon(sim.url);
    const api = apiClient(td);
    const token = await api.token(['submit', 'read']);

    const created = await api.call('POST', '/api/v1/jobs', {
      token,
      body: { sbatch: script(sim.workDir, 'sf-api-sbatch'), spec: { time_limit: '0:10:00' } },
    });
    expect(created.status).toBe(201);
    const { id } = created.json as { id: string };
    await td.waitForState(id, 'completed');
    const detail = (await api.call('GET', `/api/v1/jobs/${id}`, { token })).json as Detail;
    expect(detail.spec).toMatchObject({ name: 'sf-api-sbatch', time_limit: 10, environment: ['GREETING=hi'] });

    // Without --job-name, "sbatch", as sbatch names a script it reads from its input.
    const unnamed = await api.call('POST', '/api/v1/jobs', {
      token,
      body: { sbatch: `#!/bin/sh\n#SBATCH -D ${sim.workDir}\ntrue\n` },
    });
    expect(unnamed.status).toBe(201);
    const unnamedDetail = (await api.call('GET', `/api/v1/jobs/${(unnamed.json as { id: string }).id}`, { token }))
      .json as Detail;
    expect(unnamedDetail.spec.name).toBe('sbatch');

    // The script's problems, each with its line; its overrides' are the spec's (said first, on their own).
    const refused = await api.call('POST', '/api/v1/jobs', {
      token,
      body: { sbatch: '#!/bin/sh\n#SBATCH --tme=5\n#SBATCH -t soon\ntrue\n', spec: { comment: 'from the API' } },
    });
    expect(refused.status).toBe(400);
    expect(errorOf(refused).fields).toEqual([
      {
        in: 'body',
        path: 'sbatch',
        reason: expect.stringMatching(/^line 2: --tme: not an sbatch option .*did you mean --time\?/),
      },
      { in: 'body', path: 'sbatch', reason: expect.stringMatching(/^line 3: -t: "soon" is not a Slurm time/) },
    ]);
    const misspelt = await api.call('POST', '/api/v1/jobs', {
      token,
      body: { sbatch: '#!/bin/sh\ntrue\n', spec: { time_limt: 5 } },
    });
    expect(errorOf(misspelt).fields).toEqual([
      { in: 'body', path: 'spec.time_limt', reason: 'unknown member "time_limt"; did you mean "time_limit"?' },
    ]);
    const neither = await api.call('POST', '/api/v1/jobs', { token, body: {} });
    expect(neither.status).toBe(400);
    expect(errorOf(neither).fields).toEqual([
      { in: 'body', path: 'spec', reason: 'a job needs `spec` (or `sbatch`, a job script)' },
    ]);

    // slurmrestd's body as the spec, and its `{set, number, infinite}` numbers.
    const wrapped = await api.call('POST', '/api/v1/jobs', {
      token,
      body: {
        spec: {
          job: {
            name: 'sf-api-restd',
            script: '#!/bin/sh\ntrue\n',
            current_working_directory: sim.workDir,
            time_limit: { set: true, infinite: false, number: 3 },
            memory_per_node: { set: true, number: 128 },
          },
        },
      },
    });
    expect(wrapped.status).toBe(201);
    const wrappedDetail = (await api.call('GET', `/api/v1/jobs/${(wrapped.json as { id: string }).id}`, { token }))
      .json as Detail;
    expect(wrappedDetail.spec).toMatchObject({ name: 'sf-api-restd', time_limit: 3, memory_per_node: 128 });
    const hetjob = await api.call('POST', '/api/v1/jobs', {
      token,
      body: { spec: { jobs: [{ name: 'a' }, { name: 'b' }] } },
    });
    expect(hetjob.status).toBe(400);
    expect(errorOf(hetjob).fields).toContainEqual({
      in: 'body',
      path: 'spec.jobs',
      reason: expect.stringMatching(/^"jobs" is slurmrestd's heterogeneous job/),
    });
  }, 90_000);
});
