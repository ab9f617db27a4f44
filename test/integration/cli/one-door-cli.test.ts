import { existsSync, statSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { listRequests, transitionsOf } from '../../../src/db/requests.js';
import { shellSpec } from '../../helpers/api.js';
import { runCli } from '../../helpers/cli-process.js';
import { daemonTestEnv } from '../../helpers/daemon.js';

/**
 * The CLI's job requests go through the daemon's one door (src/requests/accept.ts), by its local
 * API and the credential the daemon publishes for each start: recorded as the CLI's, refused as
 * the API refuses, and nothing left waiting anywhere when no daemon serves the API.
 */

const env = daemonTestEnv();

describe("schedflow jobs submit through the daemon's API", () => {
  it('is recorded by the door as the CLI’s; a refusal of the door is said with its file, exit 2, nothing recorded', async () => {
    const sim = await env.sim();
    const td = await env.daemon(sim.url);
    const api = join(td.dataDir, 'local-api.json');
    // The CLI's credential of this start, its owner's alone.
    expect(statSync(api).mode & 0o077).toBe(0);

    const ok = join(sim.workDir, 'ok.json');
    writeFileSync(ok, JSON.stringify(shellSpec('by-cli', 'true', sim.workDir)));
    const submitted = await runCli(['jobs', 'submit', ok, '--data-dir', td.dataDir], { timeoutMs: 60_000 });
    expect(submitted.code, submitted.stderr).toBe(0);
    const id = /^queued request (\S+) \(profile /.exec(submitted.stdout)?.[1] ?? '';
    const [row] = await listRequests(td.daemon.history.store, {});
    expect(row).toMatchObject({ id, origin: 'cli', name: 'by-cli' });
    const [accepted] = await transitionsOf(td.daemon.history.store, id);
    expect(accepted).toMatchObject({ toState: 'accepted', source: 'cli' });

    // Past the profile's maxArraySize (Slurm's 1001): the API's 422, said as the CLI says it.
    const big = join(sim.workDir, 'big.json');
    writeFileSync(big, JSON.stringify({ ...shellSpec('big', 'true', sim.workDir), array: '0-5000' }));
    const refused = await runCli(['jobs', 'submit', big, '--data-dir', td.dataDir], { timeoutMs: 60_000 });
    expect(refused.code, refused.stderr).toBe(2);
    expect(refused.stderr).toMatch(new RegExp(`^schedflow: ${big}: the array names index 5000, but profile `));
    expect(refused.stderr).not.toMatch(/^\s+at /m);
    expect((await listRequests(td.daemon.history.store, {})).map((r) => r.name)).toEqual(['by-cli']);

    // Stopped: the address goes with the API (before the test daemon's folder is removed too),
    // and a command fails at once saying what to do.
    await td.daemon.stop();
    expect(existsSync(api)).toBe(false);
    const startedAt = Date.now();
    const late = await runCli(['jobs', 'submit', ok, '--data-dir', td.dataDir], { timeoutMs: 60_000 });
    // A process of the CLI takes seconds to start on a loaded machine; one left waiting would hit the 60 s.
    expect(Date.now() - startedAt).toBeLessThan(30_000);
    expect(late.code, late.stderr).toBe(2);
    // This test's process (the daemon's pid) lives on: said as a daemon that serves no API.
    expect(late.stderr).toMatch(
      /^schedflow: the daemon of .+ does not serve the local API .*so nothing was queued: start it/,
    );
    expect(late.stdout).toBe('');
  }, 120_000);

  it('a daemon without the web role takes no CLI request: refused at once, nothing queued', async () => {
    const sim = await env.sim();
    const td = await env.daemon(sim.url, { roles: ['scheduler', 'worker'] });
    expect(existsSync(join(td.dataDir, 'local-api.json'))).toBe(false);
    const file = join(sim.workDir, 'ok.json');
    writeFileSync(file, JSON.stringify(shellSpec('no-web', 'true', sim.workDir)));
    const submit = await runCli(['jobs', 'submit', file, '--data-dir', td.dataDir], { timeoutMs: 60_000 });
    expect(submit.code, submit.stderr).toBe(2);
    expect(submit.stderr).toMatch(/does not serve the local API \(it runs without the web role/);
    expect(await listRequests(td.daemon.history.store, {})).toEqual([]);
  }, 120_000);
});
