import { describe, expect, it } from 'vitest';
import { listAudit } from '../../../src/db/audit.js';
import type { AuditRow } from '../../../src/db/schema.js';
import { jobSpecSchema } from '../../../src/sched/job-spec.js';
import { apiClient, shellSpec } from '../../helpers/api.js';
import { launchBrowser } from '../../helpers/browser.js';
import { runCli } from '../../helpers/cli-process.js';
import { daemonTestEnv, type TestDaemon } from '../../helpers/daemon.js';
import type { HttpResult } from '../../helpers/http.js';
import { TEST_HISTORY } from '../../helpers/test-history.js';

/**
 * Issue 33's audit log through the local API, the CLI and the UI, against a real daemon on the
 * simulator (SQLite, or PostgreSQL under `npm run test:postgres`): each action a caller asks for
 * writes one row with its actor, owner, target and the `x-request-id` of its call; a refusal
 * writes one `refused` row; the log is read by admins and auditors only.
 */

const env = daemonTestEnv();

/** A pipeline with a schedule that never fires in a test (1 January), and a step that runs long. */
const PIPELINE = (cwd: string) =>
  [
    'schedule:',
    "  cron: '0 0 1 1 *'",
    'defaults:',
    `  current_working_directory: ${cwd}`,
    'steps:',
    '  long:',
    '    script: "#!/bin/sh\\nsleep 60\\n"',
  ].join('\n');

const rowsOf = async (td: TestDaemon, action: string): Promise<AuditRow[]> =>
  listAudit(td.daemon.history.store, { action, limit: 100 });

/** The one row a call wrote: found by its request id, which the answer's `x-request-id` names. */
async function rowOfCall(td: TestDaemon, r: HttpResult): Promise<AuditRow> {
  const id = r.headers.get('x-request-id');
  expect(id).toBeTruthy();
  const rows = (await listAudit(td.daemon.history.store, { limit: 1000 })).filter((row) => row.httpRequestId === id);
  expect(rows, `rows of ${id}`).toHaveLength(1);
  return rows[0] as AuditRow;
}

describe('the audit log', () => {
  it('one row per action with actor, owner, target and request id; refusals alone; read by admin and auditor only', async () => {
    const sim = await env.sim({ cpus: 4 });
    const td = await env.daemon(sim.url, {}, { 'nightly.yaml': PIPELINE(sim.workDir) });
    expect(td.daemon.history.store.dialect).toBe(TEST_HISTORY);
    const api = apiClient(td);
    const ops = await api.token(['admin'], 'ops', 'ops');

    // Cancel of a running job: the scheduler is asked (202), one ok row.
    const created = await api.call('POST', '/api/v1/jobs', {
      token: ops,
      body: { spec: shellSpec('audit-long', 'sleep 60', sim.workDir) },
    });
    const jobId = (created.json as { id: string }).id;
    await td.waitForState(jobId, 'running', 30_000);
    const cancelled = await api.call('DELETE', `/api/v1/jobs/${jobId}`, { token: ops });
    expect(cancelled.status, cancelled.text).toBe(202);
    // The token's owner is its name (ops): its job is ops's.
    expect(await rowOfCall(td, cancelled)).toMatchObject({
      actor: 'token:ops',
      owner: 'ops',
      action: 'request.cancel',
      target: `request:${jobId}`,
      outcome: 'ok',
    });
    await td.waitForState(jobId, 'cancelled', 30_000);
    // Nothing left to cancel: refused, one row, nothing changed.
    const again = await api.call('DELETE', `/api/v1/jobs/${jobId}`, { token: ops });
    expect(again.status).toBe(409);
    expect(await rowOfCall(td, again)).toMatchObject({
      action: 'request.cancel',
      outcome: 'refused',
      detail: 'already ended: cancelled',
    });

    // Retry of an array's failed tasks, and a refused one.
    const arrayId = await td.daemon.submit({
      spec: jobSpecSchema.parse({
        name: 'audit-array',
        script: '#!/bin/sh\n[ "$SLURM_ARRAY_TASK_ID" = 1 ] && exit 3\ntrue\n',
        array: '0-2',
        current_working_directory: sim.workDir,
      }),
      owner: 'default',
      actor: 'test',
      origin: 'api',
    });
    await td.waitForState(arrayId, 'failed', 30_000);
    const retried = await api.call('POST', `/api/v1/jobs/${arrayId}/retry-tasks`, { token: ops, body: {} });
    expect(retried.status, retried.text).toBe(201);
    const retryRow = await rowOfCall(td, retried);
    expect(retryRow).toMatchObject({
      actor: 'token:ops',
      owner: 'default',
      action: 'request.retry-tasks',
      target: `request:${arrayId}`,
      outcome: 'ok',
    });
    expect(retryRow.detail).toContain((retried.json as { id: string }).id);
    const notATask = await api.call('POST', `/api/v1/jobs/${arrayId}/retry-tasks`, {
      token: ops,
      body: { indexes: '9' },
    });
    expect(notATask.status).toBe(409);
    expect(await rowOfCall(td, notATask)).toMatchObject({ action: 'request.retry-tasks', outcome: 'refused' });

    // A run triggered, then cancelled.
    const run = await api.call('POST', '/api/v1/pipelines/nightly/runs', { token: ops, body: {} });
    expect(run.status, run.text).toBe(201);
    const runId = (run.json as { id: string }).id;
    expect(await rowOfCall(td, run)).toMatchObject({
      actor: 'token:ops',
      owner: 'default',
      action: 'run.trigger',
      target: `run:${runId}`,
      outcome: 'ok',
    });
    const runCancel = await api.call('POST', `/api/v1/runs/${runId}/cancel`, { token: ops });
    expect([200, 202]).toContain(runCancel.status);
    expect(await rowOfCall(td, runCancel)).toMatchObject({
      action: 'run.cancel',
      target: `run:${runId}`,
      outcome: 'ok',
      detail: 'cancel asked',
    });
    // The run's cancel cancels its step: the run's row says so, no row per step.
    expect((await rowsOf(td, 'request.cancel')).map((r) => r.httpRequestId)).not.toContain(
      runCancel.headers.get('x-request-id'),
    );

    // The schedule paused, paused again (nothing to change: refused), resumed.
    const paused = await api.call('POST', '/api/v1/pipelines/nightly/pause', { token: ops });
    expect(paused.status, paused.text).toBe(200);
    expect(await rowOfCall(td, paused)).toMatchObject({
      action: 'schedule.pause',
      target: 'pipeline:nightly',
      owner: 'default',
      outcome: 'ok',
    });
    const pausedAgain = await api.call('POST', '/api/v1/pipelines/nightly/pause', { token: ops });
    expect(await rowOfCall(td, pausedAgain)).toMatchObject({ outcome: 'refused', detail: 'already paused' });
    const resumed = await api.call('POST', '/api/v1/pipelines/nightly/resume', { token: ops });
    expect(await rowOfCall(td, resumed)).toMatchObject({ action: 'schedule.resume', outcome: 'ok' });

    // Reading it: the audit scope or admin; read, submit and cancel tokens get 403.
    for (const scopes of [['read'], ['submit'], ['cancel'], ['read', 'submit', 'cancel']] as const) {
      const token = await api.token([...scopes]);
      expect((await api.call('GET', '/api/v1/audit', { token })).status).toBe(403);
    }
    const auditor = await api.token(['audit'], 'auditor');
    const all = await api.call('GET', '/api/v1/audit?limit=200', { token: auditor });
    expect(all.status, all.text).toBe(200);
    const items = (all.json as { items: { id: number; action: string; http_request_id: string | null }[] }).items;
    expect(items.length).toBeGreaterThanOrEqual(9);
    expect(items.map((i) => i.id)).toEqual([...items.map((i) => i.id)].sort((a, b) => b - a));
    // Newest first: the tokens just made (token.create), then the resume.
    expect(items.filter((i) => i.action !== 'token.create')[0]).toMatchObject({
      action: 'schedule.resume',
      http_request_id: resumed.headers.get('x-request-id'),
    });
    // Filtered by action and owner; pages of two walk the whole list once.
    const cancels = await api.call('GET', '/api/v1/audit?action=request.cancel&owner=ops', { token: ops });
    expect((cancels.json as { items: { outcome: string }[] }).items.map((i) => i.outcome)).toEqual(['refused', 'ok']);
    const noOne = await api.call('GET', '/api/v1/audit?owner=lab-z', { token: ops });
    expect((noOne.json as { items: unknown[] }).items).toEqual([]);
    const later = await api.call('GET', `/api/v1/audit?since=${new Date(Date.now() + 60_000).toISOString()}`, {
      token: ops,
    });
    expect((later.json as { items: unknown[] }).items).toEqual([]);
    const walked: number[] = [];
    let cursor: string | null = null;
    do {
      const query: string = cursor ? `&cursor=${cursor}` : '';
      const page = await api.call('GET', `/api/v1/audit?limit=2${query}`, { token: auditor });
      const body = page.json as { items: { id: number }[]; next: string | null };
      expect(body.items.length).toBeLessThanOrEqual(2);
      walked.push(...body.items.map((i) => i.id));
      cursor = body.next;
    } while (cursor);
    expect(walked).toEqual(items.map((i) => i.id));
    expect((await api.call('GET', '/api/v1/audit?cursor=nope', { token: ops })).status).toBe(400);
    expect((await api.call('GET', '/api/v1/audit?action=DROP%20TABLE', { token: ops })).status).toBe(400);

    // The CLI reads the same history: a table, and JSON as the API's items.
    const cli = (...args: string[]) => runCli(['audit', ...args, '--data-dir', td.dataDir], { timeoutMs: 60_000 });
    const [table, json, filtered] = await Promise.all([
      cli('--since', '1h'),
      cli('--json', '--limit', '3'),
      cli('--action', 'run.trigger', '--owner', 'default', '--json'),
    ]);
    expect(table.code, table.stderr).toBe(0);
    expect(table.stdout.split('\n')[0]).toMatch(
      /^AT \(UTC\)\s+ACTOR\s+OWNER\s+ACTION\s+TARGET\s+OUTCOME\s+HTTP REQUEST/,
    );
    expect(table.stdout).toContain(`request:${jobId}`);
    expect(table.stdout).toContain('schedule.pause');
    expect(json.code, json.stderr).toBe(0);
    expect(JSON.parse(json.stdout)).toEqual(items.slice(0, 3));
    expect(JSON.parse(filtered.stdout)).toEqual([
      expect.objectContaining({ action: 'run.trigger', target: `run:${runId}`, actor: 'token:ops' }),
    ]);
    const none = await cli('--since', new Date(Date.now() + 3600_000).toISOString());
    expect(none.stdout).toBe('no audit rows match\n');
  }, 180_000);

  it('the UI: an Audit page for admin and auditor sessions, refused to others; its cancel writes a ui: row', async () => {
    const sim = await env.sim();
    const td = await env.daemon(sim.url);
    const api = apiClient(td);
    const base = `${td.daemon.apiUrl}/ui`;
    const auditorToken = await api.token(['read', 'audit'], 'eve');
    const auditorCookie = await uiLogin(base, auditorToken);
    const readerCookie = await uiLogin(base, await api.token(['read'], 'rita'));
    const adminCookie = await uiLogin(base, await api.token(['admin'], 'ada'));

    // An admin cancels a running job from its page.
    const jobId = await td.daemon.submit({
      spec: jobSpecSchema.parse({
        name: 'ui-audit',
        script: '#!/bin/sh\nsleep 60\n',
        current_working_directory: sim.workDir,
      }),
      owner: 'default',
      actor: 'test',
      origin: 'api',
    });
    await td.waitForState(jobId, 'running', 30_000);
    const csrf = await csrfOf(`${base}/jobs/${jobId}`, adminCookie);
    const cancel = await fetch(`${base}/jobs/${jobId}/cancel`, {
      method: 'POST',
      redirect: 'manual',
      headers: { cookie: adminCookie, 'content-type': 'application/x-www-form-urlencoded' },
      body: new URLSearchParams({ _csrf: csrf }).toString(),
    });
    expect(cancel.status).toBe(303);
    const [row] = await rowsOf(td, 'request.cancel');
    expect(row).toMatchObject({
      actor: 'ui:token:ada',
      owner: 'default',
      target: `request:${jobId}`,
      httpRequestId: cancel.headers.get('x-request-id'),
    });

    const shown = await fetch(`${base}/audit?action=request.cancel`, { headers: { cookie: auditorCookie } });
    expect(shown.status).toBe(200);
    const text = await shown.text();
    expect(text).toContain('<h1>Audit log</h1>');
    expect(text).toContain(`request:${jobId}`);
    expect(text).toContain('ui:token:ada');
    expect(text).toContain(`href="/ui/audit"`);
    const refused = await fetch(`${base}/audit`, { headers: { cookie: readerCookie } });
    expect(refused.status).toBe(403);
    const readerJobs = await (await fetch(`${base}/jobs`, { headers: { cookie: readerCookie } })).text();
    expect(readerJobs).not.toContain(`href="/ui/audit"`);

    // In Chromium: the auditor follows the nav link, filters by action, and reads the row.
    const browser = await launchBrowser();
    env.defer(() => browser.close());
    const page = await browser.page();
    await page.goto(`${base}/jobs`);
    await page.getByLabel('Local API token').fill(auditorToken);
    await page.getByRole('button', { name: 'Log in' }).click();
    await page.waitForURL(`${base}/jobs`);
    await page.getByRole('navigation', { name: 'main' }).getByRole('link', { name: 'Audit', exact: true }).click();
    await page.waitForURL(`${base}/audit`);
    await page.getByLabel('Action').fill('request.cancel');
    await page.getByRole('button', { name: 'Filter' }).click();
    await page.waitForURL(/action=request.cancel/);
    const cells = page.locator('tbody tr').first().locator('td');
    await expect(cells.nth(1).textContent()).resolves.toBe('ui:token:ada');
    await expect(cells.nth(4).textContent()).resolves.toBe(`request:${jobId}`);
    await expect(cells.nth(6).textContent()).resolves.toBe(cancel.headers.get('x-request-id'));
    await browser.screenshot(page, 'audit');
  }, 120_000);
});

/** Logs in to the UI with a token over plain HTTP; the session's cookie header. */
async function uiLogin(base: string, token: string): Promise<string> {
  const form = await fetch(`${base}/login`);
  const loginCookie = cookiesOf(form);
  const nonce = /name="_login" value="([^"]+)"/.exec(await form.text())?.[1] ?? '';
  const login = await fetch(`${base}/login`, {
    method: 'POST',
    redirect: 'manual',
    headers: { cookie: loginCookie, 'content-type': 'application/x-www-form-urlencoded' },
    body: new URLSearchParams({ _login: nonce, token, next: '/ui/jobs' }).toString(),
  });
  expect(login.status).toBe(303);
  return cookiesOf(login);
}

function cookiesOf(r: Response): string {
  return r.headers
    .getSetCookie()
    .map((c) => c.split(';')[0])
    .filter((c) => !c?.endsWith('='))
    .join('; ');
}

async function csrfOf(url: string, cookie: string): Promise<string> {
  const text = await (await fetch(url, { headers: { cookie } })).text();
  const token = /name="_csrf" value="([^"]+)"/.exec(text)?.[1];
  if (!token) throw new Error(`no CSRF token on ${url}`);
  return token;
}
