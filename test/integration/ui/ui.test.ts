import { randomUUID } from 'node:crypto';
import { writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { history } from '../../../src/db/accounting.js';
import { tasksOf } from '../../../src/db/array-tasks.js';
import { getRequest, listRequests } from '../../../src/db/requests.js';
import { getRun } from '../../../src/db/runs.js';
import { createToken, revokeToken } from '../../../src/db/tokens.js';
import { recordRequest } from '../../../src/requests/accept.js';
import { transition } from '../../../src/requests/transition.js';
import type { JobSpec } from '../../../src/sched/job-spec.js';
import { waitFor } from '../../helpers/http.js';
import {
  adminToken,
  base,
  browser,
  liveState,
  logIn,
  readToken,
  shell,
  sim,
  td,
  UI_PASSWORD,
  useUiDaemon,
} from './ui-env.js';

/**
 * The admin web UI end to end, in headless Chromium against one in-process daemon on the
 * simulator and real Redis (ui-env.ts). A replayed request's page is in ui-replayed.test.ts.
 */

useUiDaemon();

describe('admin web UI', () => {
  it('shows an unauthenticated visitor the login page only', async () => {
    const page = await browser.page();
    for (const path of ['', '/jobs', '/history', '/pipelines', '/profiles', '/queues/', '/queues-admin/']) {
      await page.goto(`${base}${path}`);
      expect(new URL(page.url()).pathname).toBe('/ui/login');
      await expect(page.getByRole('heading', { name: 'Log in to schedflow' }).isVisible()).resolves.toBe(true);
    }
    await browser.screenshot(page, 'login');
    // Actions and the event stream refuse too.
    const post = await fetch(`${base}/pipelines/greet/trigger`, { method: 'POST', redirect: 'manual' });
    expect(post.status).toBe(401);
    const events = await fetch(`${base}/events`, { redirect: 'manual' });
    expect(events.status).toBe(303);
    // A wrong token is refused with a message, and still no session.
    await page.getByLabel('Local API token').fill('sfa_not-a-token');
    await page.getByRole('button', { name: 'Log in' }).click();
    await expect(page.getByText('That token or password is not valid.').isVisible()).resolves.toBe(true);
    expect((await page.context().cookies()).some((c) => c.name === 'schedflow_ui')).toBe(false);
    // The configured password logs in with admin rights, back to the page first asked for
    // (the last one above); logging out ends the session.
    await page.getByLabel('or the UI password').fill(UI_PASSWORD);
    await page.getByRole('button', { name: 'Log in' }).click();
    await page.waitForURL(`${base}/queues-admin/`, { timeout: 5000 });
    await page.goto(`${base}/jobs`);
    await expect(page.getByText('password · admin').isVisible()).resolves.toBe(true);
    await page.getByRole('button', { name: 'Log out' }).click();
    await page.waitForURL(/\/ui\/login$/);
    await page.goto(`${base}/jobs`);
    expect(new URL(page.url()).pathname).toBe('/ui/login');
  });

  it('follows a job from submission to COMPLETED without reloading', async () => {
    const page = await logIn(adminToken);
    const cookie = (await page.context().cookies()).find((c) => c.name === 'schedflow_ui');
    expect(cookie).toMatchObject({ httpOnly: true, sameSite: 'Strict' });
    expect(cookie?.value).not.toContain(adminToken);

    // The job runs until the test lets it end, so the page is open before it can finish.
    const gate = join(sim.workDir, 'ui-watch.go');
    const id = await td.daemon.submit({
      spec: shell('ui-watch', `while [ ! -e ${gate} ]; do sleep 0.2; done; echo watched`),
      owner: 'default',
      actor: 'test',
      origin: 'api',
    });
    await page.goto(`${base}/jobs/${id}`);
    // Lost if the page were loaded again: the update must come through the event stream.
    await page.evaluate('window.notReloaded = true');
    await liveState(page, id, 'running', 20_000);
    writeFileSync(gate, '');
    await liveState(page, id, 'completed', 30_000);
    expect(await page.evaluate('window.notReloaded')).toBe(true);
    // The timeline has the whole story, and the page the job id and its output.
    const timeline = page.getByRole('list', { name: 'timeline' });
    for (const s of ['queued', 'submitted', 'running', 'completed']) {
      await expect(timeline.getByText(s, { exact: true }).first().isVisible()).resolves.toBe(true);
    }
    const row = await td.waitForState(id, 'completed');
    await expect(page.getByText(String(row.jobId), { exact: true }).first().isVisible()).resolves.toBe(true);
    await page.locator('pre.output', { hasText: 'watched' }).waitFor({ timeout: 10_000 });
    // Where its output went, as the scheduler expanded slurm-%j.out; stderr goes there too.
    await page.goto(`${base}/jobs/${id}`);
    const facts = page.locator('dl.facts').first();
    await expect(facts.getByText(`${row.stdoutPath}`, { exact: true }).isVisible()).resolves.toBe(true);
    expect(row.stdoutPath).toMatch(new RegExp(`/slurm-${row.jobId}\\.out$`));
    await expect(facts.getByText('with stdout', { exact: true }).isVisible()).resolves.toBe(true);
    // Times are shown in the viewer's zone, with UTC on hover.
    const title = await page.locator('main time').first().getAttribute('title');
    expect(title).toMatch(/UTC$/);
    await expect(page.locator('main time').first().textContent()).resolves.not.toMatch(/UTC$/);
    await browser.screenshot(page, 'job-completed');
    await page.goto(`${base}/jobs`);
    await expect(page.getByRole('link', { name: 'ui-watch' }).first().isVisible()).resolves.toBe(true);
    await browser.screenshot(page, 'jobs');
    const phone = await logIn(adminToken, { width: 390 });
    await phone.goto(`${base}/jobs/${id}`);
    await browser.screenshot(phone, 'job-phone');
  });

  it('cancels a running job from its page; a POST without the CSRF token is refused', async () => {
    const page = await logIn(adminToken);
    const id = await td.daemon.submit({
      spec: shell('ui-cancel', 'sleep 120'),
      owner: 'default',
      actor: 'test',
      origin: 'api',
    });
    await td.waitForState(id, 'running');
    await page.goto(`${base}/jobs/${id}`);
    // How fresh the state is: the profile's last poll, a moment ago.
    await expect(page.getByText(/^as of \d+ s ago/).isVisible()).resolves.toBe(true);
    await browser.screenshot(page, 'job-running');

    // Forged: the session's cookie but no CSRF field.
    const forged = await page.context().request.post(`${base}/jobs/${id}/cancel`, { form: {}, maxRedirects: 0 });
    expect(forged.status()).toBe(403);
    const forgedWrong = await page
      .context()
      .request.post(`${base}/jobs/${id}/cancel`, { form: { _csrf: 'guess' }, maxRedirects: 0 });
    expect(forgedWrong.status()).toBe(403);
    expect(await td.states(id)).not.toContain('cancelled');

    page.once('dialog', (dialog) => void dialog.accept());
    await page.getByRole('button', { name: 'Cancel job' }).click();
    await page.getByText('Cancel sent to the scheduler').waitFor();
    await liveState(page, id, 'cancelled', 20_000);
    await td.waitForState(id, 'cancelled');
    // The page follows the end as it comes (the live state first, the buttons with the next render).
    await page.getByRole('button', { name: 'Cancel job' }).waitFor({ state: 'detached', timeout: 20_000 });
    await expect(page.getByRole('button', { name: 'Cancel job' }).count()).resolves.toBe(0);
    await browser.screenshot(page, 'job-cancelled');
  });

  it('retries a failed request as a new request with the same spec', async () => {
    const page = await logIn(adminToken);
    const id = await td.daemon.submit({
      spec: shell('ui-fails', 'echo oops >&2; exit 3'),
      owner: 'default',
      actor: 'test',
      origin: 'api',
    });
    await td.waitForState(id, 'failed');
    await page.goto(`${base}/jobs/${id}`);
    await page.getByRole('button', { name: 'Retry (new request, same spec)' }).click();
    await page.getByText('Retried: this is the new request').waitFor();
    const newId = new URL(page.url()).pathname.split('/').pop() ?? '';
    expect(newId).not.toBe(id);
    const retried = await td.waitForState(newId, 'failed');
    expect(retried.spec).toEqual((await getRequest(td.daemon.history.store, id))?.spec);
    await browser.screenshot(page, 'job-retried');
  });

  it('says a retry the door refuses, and makes no request', async () => {
    // A request that failed before the profile was bound to its token's account (lab), naming
    // another: the same spec submitted again would be refused by the proxy (403), so it is refused
    // at the door. Written to the history as the daemon would have.
    const h = td.daemon.history.store;
    const id = randomUUID();
    const spec = { ...shell('ui-other-account', 'true'), account: 'other' } as JobSpec;
    const at = Date.now();
    await recordRequest(h, {
      id,
      profile: 'test',
      name: spec.name,
      spec,
      owner: 'default',
      actor: 'test',
      origin: 'api',
      at,
      source: 'api',
    });
    await transition(h, id, { to: 'failed', source: 'poll', at, reason: 'InvalidAccount' });
    const before = (await listRequests(h, {})).length;
    const page = await logIn(adminToken);
    await page.goto(`${base}/jobs/${id}`);
    await page.getByRole('button', { name: 'Retry (new request, same spec)' }).click();
    await page.waitForURL(/done=retry-refused/);
    // Shown as an error, on the same request's page, and nothing was recorded or queued.
    const flash = page.locator('main p.flash.error[role="status"]', {
      hasText: "Not retried: this profile's submissions are refused at the door",
    });
    await expect(flash.isVisible()).resolves.toBe(true);
    expect(new URL(page.url()).pathname).toBe(`/ui/jobs/${id}`);
    expect((await listRequests(h, {})).length).toBe(before);
    await browser.screenshot(page, 'job-retry-refused');
  });

  it('triggers a pipeline with a parameter and shows its run as a graph', async () => {
    const page = await logIn(adminToken);
    await page.getByRole('link', { name: 'Pipelines' }).click();
    // A schedule in words and cron, with its next fire times.
    const nightly = page.getByRole('row').filter({ hasText: 'nightly' });
    await expect(nightly.getByText('At 02:30, Monday through Friday').isVisible()).resolves.toBe(true);
    await expect(nightly.getByText('30 2 * * 1-5').isVisible()).resolves.toBe(true);
    await expect(nightly.locator('time').count()).resolves.toBe(3);
    await browser.screenshot(page, 'pipelines');
    await page.getByRole('link', { name: 'greet' }).click();
    await browser.screenshot(page, 'pipeline');
    await page.getByLabel('greeting').fill('bonjour');
    await page.getByRole('button', { name: 'Trigger greet' }).click();
    await page.waitForURL(/\/ui\/runs\//);
    await page.getByText('Run started.').waitFor();
    const graph = page.getByRole('img', { name: 'steps of the run and their dependencies' });
    await expect(graph.locator('g.node').count()).resolves.toBe(3);
    await expect(graph.locator('path.edge').count()).resolves.toBe(2);
    // The run ends while the page is open; its badge and the graph follow.
    await page.locator('main dd .state', { hasText: /^succeeded$/ }).waitFor({ timeout: 30_000 });
    await expect(graph.locator('g.node[data-state="completed"]').count()).resolves.toBe(3);
    const runId = new URL(page.url()).pathname.split('/').pop() ?? '';
    const run = await getRun(td.daemon.history.store, runId);
    expect(run?.trigger).toBe('ui');
    expect(run?.params).toEqual({ greeting: 'bonjour' });
    // How and by whom it was started, on its page as in the history.
    expect(run?.triggeredBy).toMatch(/^web UI \(.+\)$/);
    await expect(page.locator('main dd', { hasText: `the web UI (${run?.triggeredBy})` }).isVisible()).resolves.toBe(
      true,
    );
    await browser.screenshot(page, 'run');
    await page.getByRole('link', { name: 'Runs', exact: true }).click();
    await browser.screenshot(page, 'runs');
  });

  it('cancels a run from its page; a forged POST and a read-only session are refused', async () => {
    const run = await td.daemon.pipelines.trigger('slow', { actor: 'test', trigger: 'api' });
    await waitFor(async () => ((await getRun(td.daemon.history.store, run.id))?.startedAt ? true : undefined), {
      what: 'the run to start',
      timeoutMs: 10_000,
    });
    const reader = await logIn(readToken);
    await reader.goto(`${base}/runs/${run.id}`);
    await expect(reader.getByRole('button', { name: 'Cancel run' }).count()).resolves.toBe(0);
    const csrf = await reader.locator('header input[name=_csrf]').getAttribute('value');
    const refused = await reader
      .context()
      .request.post(`${base}/runs/${run.id}/cancel`, { form: { _csrf: csrf ?? '' }, maxRedirects: 0 });
    expect(refused.status()).toBe(403);
    const page = await logIn(adminToken);
    const forged = await page.context().request.post(`${base}/runs/${run.id}/cancel`, { form: {}, maxRedirects: 0 });
    expect(forged.status()).toBe(403);
    expect((await getRun(td.daemon.history.store, run.id))?.cancelRequestedAt).toBeNull();

    await page.goto(`${base}/runs/${run.id}`);
    page.once('dialog', (dialog) => void dialog.accept());
    await page.getByRole('button', { name: 'Cancel run' }).click();
    await page.getByText(/^(Run cancelled\.|Cancel under way)/).waitFor();
    await liveState(page, run.id, 'cancelled', 10_000);
    await expect(page.getByText(/^asked .* by web UI \(token ui-admin\)$/).isVisible()).resolves.toBe(true);
    await expect(page.getByRole('button', { name: 'Cancel run' }).count()).resolves.toBe(0);
    // Its state changes, as the API's run detail lists them.
    await page.reload();
    const changes = await page.locator('ul.run-transitions li').allTextContents();
    expect(changes[0]).toMatch(/ — made → running \(api\)$/);
    expect(changes.at(-1)).toMatch(/ — running → cancelled \((api|pipeline): cancelled by web UI \(token ui-admin\)/);
    await browser.screenshot(page, 'run-cancelled');

    // Cancelled: resumable from its page (not by a reader), as a new attempt listed under the graph.
    await reader.goto(`${base}/runs/${run.id}`);
    await expect(reader.getByRole('button', { name: 'Resume run' }).count()).resolves.toBe(0);
    page.once('dialog', (dialog) => void dialog.accept());
    await page.getByRole('button', { name: 'Resume run' }).click();
    await page.getByText(/^Resumed: a new attempt runs the steps that did not complete/).waitFor();
    expect(await getRun(td.daemon.history.store, run.id)).toMatchObject({ state: 'running', attempt: 2 });
    await expect(page.locator('ul.run-attempts li[data-attempt="2"]').textContent()).resolves.toMatch(/^Attempt 2: /);
    await expect(page.getByRole('button', { name: 'Resume run' }).count()).resolves.toBe(0);
    const ended = await td.daemon.pipelines.cancelRun(run.id, { source: 'api', who: 'test' });
    expect(ended.kind).not.toBe('not_found');
  });

  it('pauses and resumes a scheduled pipeline from its page; a read-only session gets no button and is refused', async () => {
    const page = await logIn(adminToken);
    const schedulers = async () => (await td.daemon.queues.pipeline.getJobSchedulers()).map((s) => s.key);
    const state = page.locator('main dl.facts dt', { hasText: /^State$/ }).locator('xpath=following-sibling::dd[1]');
    await page.goto(`${base}/pipelines/nightly`);
    await expect(state.textContent()).resolves.toBe('on');
    page.once('dialog', (dialog) => void dialog.accept());
    await page.getByRole('button', { name: 'Pause schedule of nightly' }).click();
    await page.getByText('Schedule paused: its ticks make no runs until it is resumed.').waitFor();
    await expect(state.textContent()).resolves.toMatch(/^paused by token ui-admin at /);
    await expect(page.getByText('none: the schedule is paused').isVisible()).resolves.toBe(true);
    expect((await td.daemon.pipelines.get('nightly'))?.schedule?.paused?.by).toBe('token ui-admin');
    expect(await schedulers()).not.toContain('pipeline-nightly');
    await browser.screenshot(page, 'pipeline-paused');
    await page.goto(`${base}/pipelines`);
    const row = page.getByRole('row').filter({ hasText: 'nightly' });
    await expect(row.getByText('paused', { exact: true }).isVisible()).resolves.toBe(true);
    await expect(row.locator('time').count()).resolves.toBe(0);
    // The admin's session without the form's CSRF token is refused.
    const forged = await page.context().request.post(`${base}/pipelines/nightly/resume`, { form: {}, maxRedirects: 0 });
    expect(forged.status()).toBe(403);

    // Read-only: the state but no button, and a POST with the session's own CSRF token is refused.
    const reader = await logIn(
      (await createToken(td.daemon.history.store, { name: 'ui-pause-reader', scopes: ['read'], owner: 'default' }))
        .token,
    );
    await reader.goto(`${base}/pipelines/nightly`);
    await expect(reader.getByText(/^paused by token ui-admin at /).isVisible()).resolves.toBe(true);
    await expect(reader.getByRole('button', { name: /schedule of nightly/ }).count()).resolves.toBe(0);
    const csrf = await reader.locator('header input[name=_csrf]').getAttribute('value');
    const refused = await reader
      .context()
      .request.post(`${base}/pipelines/nightly/resume`, { form: { _csrf: csrf ?? '' }, maxRedirects: 0 });
    expect(refused.status()).toBe(403);
    expect((await td.daemon.pipelines.get('nightly'))?.schedule?.paused).not.toBeNull();

    await page.goto(`${base}/pipelines/nightly`);
    await page.getByRole('button', { name: 'Resume schedule of nightly' }).click();
    await page.getByText('Schedule resumed: its next tick makes a run.').waitFor();
    await expect(state.textContent()).resolves.toBe('on');
    await expect(page.locator('main dd time').count()).resolves.toBe(5);
    expect((await td.daemon.pipelines.get('nightly'))?.schedule?.paused).toBeNull();
    expect(await schedulers()).toContain('pipeline-nightly');
  });

  it('opens the queue dashboard, the profiles with their queues, and the history with charts', async () => {
    const done = await td.daemon.submit({
      spec: shell('ui-history', 'true'),
      owner: 'default',
      actor: 'test',
      origin: 'api',
    });
    const page = await logIn(adminToken);
    const elsewhere: string[] = [];
    // A request the policy blocks gets no response.
    page.on('response', (r) => {
      if (!r.url().startsWith(td.daemon.apiUrl ?? '')) elsewhere.push(r.url());
    });
    await page.getByRole('link', { name: 'Queues' }).click();
    await page.waitForURL(`${base}/queues-admin/`);
    await page.getByText('submit', { exact: true }).first().waitFor({ timeout: 15_000 });
    await page.getByText('Loading...').waitFor({ state: 'detached', timeout: 15_000 });
    await browser.screenshot(page, 'queues');
    // The page's policy keeps everything on this origin (bull-board links Google's web fonts).
    expect(elsewhere).toEqual([]);
    // The board's writes: only from a page of this origin, and never on the read-only board.
    const request = page.context().request;
    const pause = `${base}/queues-admin/api/queues/summarize/pause`;
    expect((await request.put(pause)).status()).toBe(403);
    expect((await request.put(pause, { headers: { origin: 'http://evil.example' } })).status()).toBe(403);
    expect((await request.put(`${base}/queues/api/queues/summarize/pause`)).status()).toBe(403);
    expect(await td.daemon.queues.summarize.isPaused()).toBe(false);
    const origin = new URL(base).origin;
    expect((await request.put(pause, { headers: { origin } })).status()).toBe(200);
    expect(await td.daemon.queues.summarize.isPaused()).toBe(true);
    await td.daemon.queues.summarize.resume();

    await page.goto(`${base}/profiles`);
    await expect(page.getByRole('heading', { name: 'test' }).isVisible()).resolves.toBe(true);
    await expect(page.getByText('v0.0.44').first().isVisible()).resolves.toBe(true);
    // Learnt from the simulator's answers at start: this token has every scope.
    await expect(
      page.getByText(/^token has sched:read, scheddb:read, sched:jobs:manage \(learnt from the proxy\)$/).isVisible(),
    ).resolves.toBe(true);
    page.once('dialog', (dialog) => void dialog.accept());
    await page.getByRole('button', { name: 'Pause the summarize queue' }).click();
    await page.getByText('Queue paused').waitFor();
    expect(await td.daemon.queues.summarize.isPaused()).toBe(true);
    await browser.screenshot(page, 'profiles');
    await page.getByRole('button', { name: 'Resume the summarize queue' }).click();
    await page.getByText('Queue resumed.').waitFor();
    expect(await td.daemon.queues.summarize.isPaused()).toBe(false);
    // Last poll and the budget move on by themselves: the page fetches its content again, without reloading.
    await page.evaluate(
      "window.notReloaded = true; document.querySelector('main > *').setAttribute('data-before-refresh', '')",
    );
    await page.locator('[data-before-refresh]').waitFor({ state: 'detached', timeout: 12_000 });
    expect(await page.evaluate('window.notReloaded')).toBe(true);

    // The reconciler imports accounting every 2 s here: the earlier jobs reach the history.
    await waitFor(
      async () => ((await history(td.daemon.history.store)).some((r) => r.requestId === done) ? true : undefined),
      {
        what: 'accounting records',
        timeoutMs: 20_000,
      },
    );
    await page.goto(`${base}/history`);
    await expect(page.getByRole('link', { name: 'ui-history' }).first().isVisible()).resolves.toBe(true);
    await expect(page.getByRole('img', { name: 'jobs per day by state' }).isVisible()).resolves.toBe(true);
    await expect(page.getByRole('img', { name: 'run time distribution' }).isVisible()).resolves.toBe(true);
    await page.getByLabel('Slurm state').selectOption('COMPLETED');
    await page.getByRole('button', { name: 'Filter' }).click();
    await page.waitForURL(/state=COMPLETED/);
    await expect(page.getByRole('cell', { name: 'CANCELLED' }).count()).resolves.toBe(0);
    await browser.screenshot(page, 'history');
  });

  it("shows markup from the history as text, and a request's summary", async () => {
    const page = await logIn(adminToken);
    const markup = '<img src=x onerror="window.pwned=1"><b>bold</b>';
    const pipelines = td.daemon.pipelines;
    const run = await pipelines.trigger('greet', { actor: 'test', trigger: 'api', params: { greeting: markup } });
    await page.goto(`${base}/runs/${run.id}`);
    await expect(page.getByText(`greeting=${markup}`).isVisible()).resolves.toBe(true);
    await expect(page.locator('main b').count()).resolves.toBe(0);
    expect(await page.evaluate('window.pwned')).toBeUndefined();
    const at = Date.now();
    const h = td.daemon.history.store;
    await h.run(
      h.db.insert(h.t.summaries).values({
        id: randomUUID(),
        runId: run.id,
        state: 'ready',
        kind: 'template',
        text: 'all three steps completed',
        createdAt: at,
        updatedAt: at,
      }),
    );
    await page.reload();
    await expect(page.getByText('all three steps completed').isVisible()).resolves.toBe(true);

    const id = await td.daemon.submit({
      spec: shell('ui-summary', 'true'),
      owner: 'default',
      actor: 'test',
      origin: 'api',
    });
    await td.waitForState(id, 'completed');
    const now = Date.now();
    await h.run(
      h.db.insert(h.t.summaries).values({
        id: randomUUID(),
        requestId: id,
        state: 'ready',
        kind: 'template',
        text: 'ui-summary completed in 0 s <script>window.pwned=2</script>',
        createdAt: now,
        updatedAt: now,
        completedAt: now,
      }),
    );
    await page.goto(`${base}/jobs/${id}`);
    await expect(page.getByRole('heading', { name: 'Summary', exact: true }).isVisible()).resolves.toBe(true);
    await expect(page.getByText('ui-summary completed in 0 s <script>').isVisible()).resolves.toBe(true);
    expect(await page.evaluate('window.pwned')).toBeUndefined();
    await browser.screenshot(page, 'job-summary');
  });

  it('gives a read-only token no action buttons, and refuses its actions', async () => {
    const page = await logIn(readToken);
    const id = await td.daemon.submit({
      spec: shell('ui-readonly', 'sleep 60'),
      owner: 'default',
      actor: 'test',
      origin: 'api',
    });
    await page.goto(`${base}/jobs/${id}`);
    await expect(page.getByText('read-only').isVisible()).resolves.toBe(true);
    await expect(page.locator('main button').count()).resolves.toBe(0);
    await page.goto(`${base}/pipelines/greet`);
    await expect(page.getByRole('button', { name: 'Trigger greet' }).count()).resolves.toBe(0);
    await page.goto(`${base}/profiles`);
    await expect(page.locator('main button').count()).resolves.toBe(0);
    // Even with the session's own CSRF token, the action needs the admin scope.
    await page.goto(`${base}/jobs/${id}`);
    const csrf = await page.locator('header input[name=_csrf]').getAttribute('value');
    const refused = await page
      .context()
      .request.post(`${base}/jobs/${id}/cancel`, { form: { _csrf: csrf ?? '' }, maxRedirects: 0 });
    expect(refused.status()).toBe(403);
    // The dashboard with actions is for admins; the read-only one (every owner's jobs) for
    // admins and auditors (docs/owners.md).
    const admin = await page.goto(`${base}/queues-admin/`);
    expect(admin?.status()).toBe(403);
    expect((await page.goto(`${base}/queues/`))?.status()).toBe(403);
    const auditor = await logIn(
      (await createToken(td.daemon.history.store, { name: 'ui-board-auditor', scopes: ['audit'] })).token,
    );
    await auditor.goto(`${base}/queues/`);
    await auditor.getByText('submit', { exact: true }).first().waitFor({ timeout: 15_000 });
    await browser.screenshot(auditor, 'queues-readonly');
    // Revoking the token ends its session.
    expect(await revokeToken(td.daemon.history.store, 'ui-reader')).toBe(true);
    await page.goto(`${base}/jobs`);
    expect(new URL(page.url()).pathname).toBe('/ui/login');
  });

  it("shows an array job's tasks compactly and retries its failed ones from a button", async () => {
    const page = await logIn(adminToken);
    const spec = {
      ...shell(
        'ui-array',
        'echo "hello from task $SLURM_ARRAY_TASK_ID"\n[ "$SLURM_ARRAY_TASK_ID" = 2 ] && [ ! -e ui-array-once ] && touch ui-array-once && exit 7\ntrue',
      ),
      array: '0-3',
    } as JobSpec;
    const id = await td.daemon.submit({ spec, owner: 'default', actor: 'test', origin: 'api' });
    const row = await td.waitForState(id, 'failed');
    // The tasks' accounting records, which the task pages below show, come with a reconcile
    // after the controller's answer that ended the array.
    const taskJobs = (await tasksOf(td.daemon.history.store, id)).map((t) => t.jobId as number);
    await waitFor(
      async () =>
        (await history(td.daemon.history.store)).filter((r) => taskJobs.includes(r.jobId)).length === 4 || undefined,
      { what: "the array's accounting records imported", timeoutMs: 30_000 },
    );
    await page.goto(`${base}/jobs/${id}`);
    // The array's outcome is its tasks': never one task's accounting record as if it were the whole.
    await expect(page.getByText('1 of 4 tasks failed, 3 completed').isVisible()).resolves.toBe(true);
    await expect(page.getByText('0-3: 4 tasks — 3 completed, 1 failed').isVisible()).resolves.toBe(true);
    await expect(page.getByRole('heading', { name: /^Accounting/ }).count()).resolves.toBe(0);
    await expect(page.getByText('accounting record imported').count()).resolves.toBe(0);
    const taskTable = page.getByRole('table', { name: 'array tasks' });
    await expect(taskTable.locator('tbody tr').count()).resolves.toBe(4);
    await expect(taskTable.locator('td', { hasText: /^7$/ }).count()).resolves.toBe(1);
    await browser.screenshot(page, 'job-array');
    // Each task's own output (slurm-%A_%a.out), and its own accounting record, from its row.
    await page.getByRole('link', { name: 'output of task 2' }).click();
    await page.waitForURL(/\?task=2#output$/);
    await expect(page.getByRole('heading', { name: /^Output of task 2 \(job \d+\)$/ }).isVisible()).resolves.toBe(true);
    await expect(page.getByText(`${sim.workDir}/slurm-${row.jobId}_2.out`).isVisible()).resolves.toBe(true);
    await expect(page.getByRole('heading', { name: /^Accounting of task 2 \(job \d+\)$/ }).isVisible()).resolves.toBe(
      true,
    );
    await page.getByRole('link', { name: 'output of task 1' }).click();
    await page.waitForURL(/\?task=1#output$/);
    await expect(page.getByText(`${sim.workDir}/slurm-${row.jobId}_1.out`).isVisible()).resolves.toBe(true);
    await expect(page.getByLabel('output tail').textContent()).resolves.toBe('hello from task 1\n');
    await browser.screenshot(page, 'job-array-task-output');
    // The History page: every task's accounting record is the request's (each its own job id).
    await page.goto(`${base}/history`);
    for (const jobId of taskJobs) {
      const cells = page.locator('main table tbody tr', {
        has: page.locator('td', { hasText: new RegExp(`^${jobId}$`) }),
      });
      await expect(cells.getByText(/^task \d+$/).count()).resolves.toBe(1);
      await expect(cells.getByText('external').count()).resolves.toBe(0);
    }
    await page.goto(`${base}/jobs/${id}`);
    await page.getByRole('button', { name: 'Retry failed tasks (new request)' }).click();
    await page.waitForURL(/done=tasks-retried/);
    await expect(page.getByText(`Retries tasks of ${id}`).isVisible()).resolves.toBe(true);
    const retryId = decodeURIComponent(new URL(page.url()).pathname.split('/').at(-1) ?? '');
    expect((await getRequest(td.daemon.history.store, retryId))?.arrayRetryOf).toBe(id);
    await td.waitForState(retryId, 'completed');
  });

  // Last: it stops the file's daemon.
  it('lets the daemon stop promptly while a page follows it over SSE', async () => {
    const page = await logIn(adminToken);
    const events = page.waitForResponse((r) => r.url().endsWith('/ui/events'));
    await page.goto(`${base}/jobs`);
    expect((await events).status()).toBe(200);
    const started = Date.now();
    await td.daemon.stop();
    // An open event stream must not hold up the local API's shutdown step.
    expect(Date.now() - started).toBeLessThan(10_000);
  });
});
