import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { getProfileSync } from '../../../src/db/accounting.js';
import { createToken } from '../../../src/db/tokens.js';
import type { JobSpec } from '../../../src/sched/job-spec.js';
import { bearer, http, waitFor } from '../../helpers/http.js';
import { adminToken, base, browser, logIn, shell, sim, td, useUiDaemon } from './ui-env.js';

/**
 * A replayed request's page in the admin web UI (ui-env.ts). It runs alone (vitest.config.ts):
 * the pending transition carries the scheduler's reason only when the first poll after the job
 * starts waiting finds its accounting record, and under load that came a cycle late.
 */

useUiDaemon();

describe('admin web UI', () => {
  it("shows a replayed request's page: deduplicated, pending with the scheduler's reason, stale while the controller is down", async () => {
    // The blocker takes both of the simulator's CPUs, so the next job waits for Resources.
    const gate = join(sim.workDir, 'ui-blocker.go');
    const blocker = await td.daemon.submit({
      spec: { ...shell('ui-blocker', `while [ ! -e ${gate} ]; do sleep 0.2; done`), cpus_per_task: 2 } as JobSpec,
      owner: 'default',
      actor: 'test',
      origin: 'api',
    });
    await td.waitForState(blocker, 'running');
    // A lab service POSTs the same job twice under one Idempotency-Key: the second gets the first's request.
    const lab = (
      await createToken(td.daemon.history.store, { owner: 'default', name: 'ui-lab-service', scopes: ['submit'] })
    ).token;
    const post = () =>
      http(`${td.daemon.apiUrl}/api/v1/jobs`, {
        method: 'POST',
        headers: { ...bearer(lab), 'idempotency-key': 'ui-sample-7' },
        body: { spec: shell('ui-waits', 'true') },
      });
    const first = await post();
    const again = await post();
    expect(again.headers.get('idempotent-replayed')).toBe('true');
    const { id } = first.json as { id: string };
    expect((again.json as { id: string }).id).toBe(id);
    await td.waitForState(id, 'pending');

    const page = await logIn(adminToken);
    await page.goto(`${base}/jobs/${id}`);
    const items = page.getByRole('list', { name: 'timeline' }).getByRole('listitem');
    const replayed = items.filter({
      hasText:
        'deduplicated: the same request was POSTed again with Idempotency-Key ui-sample-7 (token ui-lab-service), answered with this request (once)',
    });
    await expect(replayed.isVisible()).resolves.toBe(true);
    const pending = items.filter({ has: page.locator('.state-pending') });
    await expect(pending.textContent()).resolves.toContain('reason: Resources');
    // In time order: after the request was queued, before the scheduler's answer that it waits.
    const texts = await items.allTextContents();
    const at = (part: string) => texts.findIndex((t) => t.includes(part));
    expect(at('→ queued')).toBeLessThan(at('deduplicated'));
    expect(at('deduplicated')).toBeLessThan(at('→ pending'));
    await browser.screenshot(page, 'job-deduplicated-pending');

    // The controller goes away: the simulator's proxy serves cached answers, and the page says so.
    const setUpstream = async (state: 'up' | 'down') =>
      expect(
        (await http(`${sim.url}/_sim/upstream`, { headers: sim.admin, method: 'PUT', body: { slurmctld: state } }))
          .status,
      ).toBe(200);
    await setUpstream('down');
    try {
      await waitFor(
        async () => {
          const sync = await getProfileSync(td.daemon.history.store, 'test');
          return sync?.lastPollStale || sync?.lastPollOk === false ? true : undefined;
        },
        { what: 'a stale poll', timeoutMs: 15_000 },
      );
      await page.reload();
      await expect(page.getByText(/^as of \d+ s ago, stale: /).isVisible()).resolves.toBe(true);
      await browser.screenshot(page, 'job-stale');
    } finally {
      await setUpstream('up');
      writeFileSync(gate, '');
    }
    await td.waitForState(id, 'completed');
  }, 60_000);
});
