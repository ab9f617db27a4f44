import { describe, expect, it } from 'vitest';
import { listAudit } from '../../../src/db/audit.js';
import { apiClient, shellSpec } from '../../helpers/api.js';
import { launchBrowser } from '../../helpers/browser.js';
import { daemonTestEnv } from '../../helpers/daemon.js';
import { waitFor } from '../../helpers/http.js';

/**
 * The web UI's Hold / Release / Update buttons on a job page and Hold / Release on a run page,
 * in Chromium: shown to who holds `control` on the owner's, CSRF as every form, the change
 * shown ("held by …"), its audit row; hidden from a reader.
 */

const env = daemonTestEnv();

describe('job control in the web UI', () => {
  it('holds, updates and releases a pending job, and holds a run, from its pages', async () => {
    const sim = await env.sim({ cpus: 1 });
    const pipeline = [
      'steps:',
      '  only:',
      `    current_working_directory: ${sim.workDir}`,
      '    script: "#!/bin/sh\\ntrue\\n"',
    ].join('\n');
    const td = await env.daemon(sim.url, {}, { 'flow.yaml': pipeline });
    const api = apiClient(td);
    const ops = await api.token(['read', 'submit', 'cancel', 'control'], 'ops', 'default');
    const reader = await api.token(['read'], 'reader', 'default');
    const post = async (name: string, body: string) =>
      (
        (await api.call('POST', '/api/v1/jobs', { token: ops, body: { spec: shellSpec(name, body, sim.workDir) } }))
          .json as { id: string }
      ).id;
    const blocker = await post('ui-blocker', 'sleep 60');
    await td.waitForState(blocker, 'running', 30_000);
    const target = await post('ui-target', 'true');
    await td.waitForState(target, 'pending', 30_000);
    const base = `${api.url}/ui`;

    const browser = await launchBrowser();
    env.defer(() => browser.close());
    const login = async (token: string) => {
      const page = await browser.page({ width: 1100, height: 900 });
      await page.goto(`${base}/jobs`);
      await page.getByLabel('Local API token').fill(token);
      await page.getByRole('button', { name: 'Log in' }).click();
      await page.waitForURL(`${base}/jobs`);
      return page;
    };

    // A reader sees no control.
    const readerPage = await login(reader);
    await readerPage.goto(`${base}/jobs/${target}`);
    expect(await readerPage.getByRole('button', { name: 'Hold job' }).count()).toBe(0);

    const page = await login(ops);
    page.on('dialog', (dialog) => void dialog.accept());
    await page.goto(`${base}/jobs/${target}`);
    await page.getByRole('button', { name: 'Hold job' }).click();
    await page.waitForURL(/done=hold-done/);
    await expect(page.getByText('by ui:token:ops since', { exact: false }).first().isVisible()).resolves.toBe(true);
    await browser.screenshot(page, 'job-held');
    const [row] = await listAudit(td.daemon.history.store, { action: 'request.hold', limit: 5 });
    expect(row).toMatchObject({ actor: 'ui:token:ops', target: `request:${target}`, outcome: 'ok' });

    await page.getByLabel('new time limit').fill('0:08:00');
    await page.getByRole('button', { name: 'Update job' }).click();
    await page.waitForURL(/done=update-done/);
    // A time limit that is not one: said on the page, nothing sent.
    await page.getByLabel('new time limit').fill('soon');
    await page.getByRole('button', { name: 'Update job' }).click();
    await expect(page.getByText('is not a Slurm time', { exact: false }).first().isVisible()).resolves.toBe(true);
    await page.goto(`${base}/jobs/${target}`);
    await page.getByRole('button', { name: 'Release job' }).click();
    await page.waitForURL(/done=release-done/);
    expect(await page.getByRole('button', { name: 'Hold job' }).count()).toBe(1);
    await browser.screenshot(page, 'job-released');

    // A run: held from its page while its step waits behind the blocker.
    const run = await api.call('POST', '/api/v1/pipelines/flow/runs', { token: ops, body: {} });
    const runId = (run.json as { id: string }).id;
    await waitFor(
      async () => {
        const steps = (
          (await api.call('GET', `/api/v1/runs/${runId}`, { token: ops })).json as { steps: { state: string }[] }
        ).steps;
        return steps.length === 1 && steps[0]?.state === 'pending' ? true : undefined;
      },
      { timeoutMs: 30_000, what: 'the step pending' },
    );
    await page.goto(`${base}/runs/${runId}`);
    await page.getByRole('button', { name: 'Hold run' }).click();
    await page.waitForURL(/done=run-hold-done/);
    await expect(page.locator('.held').first().isVisible()).resolves.toBe(true);
    await browser.screenshot(page, 'run-held');
    await page.getByRole('button', { name: 'Release run' }).click();
    await page.waitForURL(/done=run-release-done/);
    await api.call('DELETE', `/api/v1/jobs/${blocker}`, { token: ops });
    await td.waitForState(target, 'completed', 30_000);
  }, 180_000);
});
