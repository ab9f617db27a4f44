import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createToken } from '../../../src/db/tokens.js';
import { deliveriesOfRequest } from '../../../src/db/webhooks.js';
import { type ApiClient, apiClient, errorOf, shellSpec } from '../../helpers/api.js';
import { startTestDaemon, type TestDaemon } from '../../helpers/daemon.js';
import { startWebhookReceiver, type WebhookReceiver } from '../../helpers/webhook-receiver.js';
import { closedPort, FAST, redis, runJob, sim, sleep, spec, waitForDelivery, webhookFile } from './webhook-files.js';

/**
 * Issue 30, point 4: a webhook URL is chosen by whoever may submit, and the daemon POSTs to it
 * from inside its network. Inward targets (the daemon's host, its private network, the cloud's
 * metadata service) are refused when the URL comes in and again when a delivery connects, unless
 * SCHEDFLOW_WEBHOOK_ALLOW_HOSTS names the host; and what a receiver answered is for admins only.
 * Names that resolve inward without looking it are in webhook-targets-resolve.test.ts.
 */

webhookFile();

const PIPELINE = ['steps:', '  only:', '    script: |', '      #!/bin/sh', '      true'].join('\n');

describe('inward webhook targets, by default', () => {
  let td: TestDaemon;
  let api: ApiClient;
  let receiver: WebhookReceiver;
  let token: string;

  beforeAll(async () => {
    receiver = await startWebhookReceiver();
    // Nothing allowed: the daemon as `npm start` runs it.
    td = await startTestDaemon(
      sim.url,
      redis.url,
      { ...FAST, notifyAttempts: 5, webhookAllowHosts: [] },
      {},
      {
        'nightly.yaml': PIPELINE,
        'metadata.yaml': `webhook: http://169.254.169.254/latest/meta-data/\n${PIPELINE}`,
      },
    );
    api = apiClient(td);
    token = await api.token(['submit', 'read']);
  });

  afterAll(async () => {
    await td?.stop();
    await receiver?.stop();
  });

  // Every spelling of the daemon's own host the issue names (PORT: the receiver's), and the metadata services.
  const INWARD = [
    'http://127.0.0.1:PORT/hook',
    'http://2130706433:PORT/hook',
    'http://0x7f.1:PORT/hook',
    'http://127.1:PORT/hook',
    'http://017700000001:PORT/hook',
    'http://[::ffff:127.0.0.1]:PORT/hook',
    'http://[::1]:PORT/hook',
    'http://0.0.0.0:PORT/hook',
    'http://localhost:PORT/hook',
    'http://LOCALHOST.:PORT/hook',
    'http://receiver.localhost:PORT/hook',
    'http://169.254.169.254/latest/meta-data/iam/security-credentials/',
    'http://[fd00:ec2::254]/latest/meta-data/',
    'http://metadata.google.internal/computeMetadata/v1/',
    'http://10.0.0.5:6379/',
    'http://192.168.1.1/admin',
    'http://[fd12:3456::1]/',
    'http://redis:6379/',
  ];

  it.each(INWARD)('refuses %s at the door with 400, naming the field and the setting that allows it', async (url) => {
    const res = await api.call('POST', '/api/v1/jobs', {
      token,
      body: {
        spec: shellSpec('inward-hook', 'true', sim.workDir),
        webhook_url: url.replace('PORT', new URL(receiver.url).port),
      },
    });
    expect(res.status).toBe(400);
    const error = errorOf(res);
    expect(error.code).toBe('SCHEDFLOW_ERR_WEBHOOK_TARGET_REFUSED');
    expect(error.message).toContain('SCHEDFLOW_WEBHOOK_ALLOW_HOSTS');
    expect(error.fields?.map((f) => f.path)).toEqual(['webhook_url']);
  });

  it("refuses a pipeline run's inward webhook too; nothing reaches the receiver", async () => {
    const run = await api.call('POST', '/api/v1/pipelines/nightly/runs', {
      token,
      body: { webhook_url: `http://2130706433:${new URL(receiver.url).port}/runs` },
    });
    expect(run.status).toBe(400);
    expect(errorOf(run).code).toBe('SCHEDFLOW_ERR_WEBHOOK_TARGET_REFUSED');
    // Nothing was recorded, so nothing is ever sent there.
    await sleep(300);
    expect(receiver.calls).toEqual([]);
  });

  it('reports a pipeline file whose webhook is inward as invalid when it is read, and runs nothing of it', async () => {
    // A file that never loaded names no owner that could be read: admins and auditors see it (docs/owners.md).
    const res = await api.call('GET', '/api/v1/pipelines', { token: await api.token(['audit']) });
    const items = (res.json as { items: { name: string; file: string; error: string | null }[] }).items;
    const file = items.find((p) => p.file.endsWith('metadata.yaml'));
    expect(file?.error).toContain('webhook: the host 169.254.169.254 is a cloud metadata address');
    expect(file?.error).toContain('SCHEDFLOW_WEBHOOK_ALLOW_HOSTS');
    expect((await api.call('POST', '/api/v1/pipelines/metadata/runs', { token, body: {} })).status).toBe(404);
  });

  it('takes a public receiver as before', async () => {
    const res = await api.call('POST', '/api/v1/jobs', {
      token,
      body: { spec: shellSpec('public-hook', 'true', sim.workDir), webhook_url: 'https://hooks.example.org/in' },
    });
    expect(res.status).toBe(201);
  });

  it('refuses again when sending, without an attempt to connect: a URL recorded before, not through the door', async () => {
    // daemon.submit is past the API's door, as a request recorded by an older version is.
    const port = new URL(receiver.url).port;
    for (const url of [`http://localhost:${port}/hook`, `http://[::ffff:127.0.0.1]:${port}/hook`]) {
      const requestId = await td.daemon.submit({
        spec: spec(),
        owner: 'default',
        actor: 'test',
        origin: 'api',
        webhookUrl: url,
      });
      await td.waitForState(requestId, 'completed');
      const delivery = await waitForDelivery(td, requestId, 'failed');
      // Failed at the first attempt, not retried: trying again would not change where it points.
      expect(delivery).toMatchObject({ attempts: 1, lastStatus: null });
      expect(delivery.lastError).toContain('SCHEDFLOW_WEBHOOK_ALLOW_HOSTS');
    }
    expect(receiver.calls).toEqual([]);
  });
});

describe('an allow-list that names the host', () => {
  it('lets a webhook to it be accepted and delivered, by name or by address', async () => {
    const receiver = await startWebhookReceiver();
    const td = await startTestDaemon(sim.url, redis.url, { ...FAST, webhookAllowHosts: ['localhost', '10.0.0.0/8'] });
    try {
      const api = apiClient(td);
      const token = await api.token(['submit', 'read']);
      const url = `http://localhost:${new URL(receiver.url).port}/hook`;
      const res = await api.call('POST', '/api/v1/jobs', {
        token,
        body: { spec: shellSpec('allowed-hook', 'true', sim.workDir), webhook_url: url },
      });
      expect(res.status).toBe(201);
      const { id } = res.json as { id: string };
      await waitForDelivery(td, id, 'delivered');
      expect(receiver.calls).toHaveLength(1);
      // A network of the list is accepted; an address outside it is not.
      const inList = await api.call('POST', '/api/v1/jobs', {
        token,
        body: { spec: shellSpec('allowed-net', 'true', sim.workDir), webhook_url: 'http://10.1.2.3/hook' },
      });
      expect(inList.status).toBe(201);
      const outside = await api.call('POST', '/api/v1/jobs', {
        token,
        body: { spec: shellSpec('other-net', 'true', sim.workDir), webhook_url: 'http://192.168.0.9/hook' },
      });
      expect(outside.status).toBe(400);
    } finally {
      await td.stop();
      await receiver.stop();
    }
  });
});

describe("a receiver's answer", () => {
  let td: TestDaemon;
  let receiver: WebhookReceiver;
  let base: string;
  let reader: string;
  let auditor: string;
  let admin: string;

  /** Logs in to the web UI with a token; the session cookie's value. */
  async function logIn(token: string): Promise<string> {
    const nonce = 'login-nonce';
    const res = await fetch(`${base}/login`, {
      method: 'POST',
      redirect: 'manual',
      headers: { 'content-type': 'application/x-www-form-urlencoded', cookie: `schedflow_ui_login=${nonce}` },
      body: new URLSearchParams({ _login: nonce, token, next: '/ui/jobs' }).toString(),
    });
    const session = res.headers
      .getSetCookie()
      .map((c) => /^schedflow_ui=([^;]+)/.exec(c)?.[1])
      .find((v) => v);
    if (!session) throw new Error(`login refused: ${res.status}`);
    return session;
  }

  const page = async (session: string, path: string) =>
    (await fetch(`${base}${path}`, { headers: { cookie: `schedflow_ui=${session}` } })).text();

  beforeAll(async () => {
    receiver = await startWebhookReceiver();
    // 127.0.0.1 allowed (the test daemons' default): an operator's internal receiver.
    td = await startTestDaemon(sim.url, redis.url, { ...FAST, notifyAttempts: 1 });
    base = `${td.daemon.apiUrl}/ui`;
    const store = td.daemon.history.store;
    reader = await logIn((await createToken(store, { owner: 'default', name: 'hook-reader', scopes: ['read'] })).token);
    auditor = await logIn((await createToken(store, { name: 'hook-auditor', scopes: ['audit'] })).token);
    admin = await logIn(
      (await createToken(store, { owner: 'default', name: 'hook-admin', scopes: ['read', 'admin'] })).token,
    );
  });

  afterAll(async () => {
    await td?.stop();
    await receiver?.stop();
  });

  it('is shown to admins only, on the job page and on the queue board', async () => {
    receiver.answer({ status: 403, body: 'intranet-banner: Jenkins 2.401 on build-07' });
    const refused = await runJob(td, `${receiver.url}/hook`, 'failed');
    expect(refused.delivery.lastError).toContain('intranet-banner');
    const closed = await runJob(td, `http://127.0.0.1:${await closedPort()}/hook`, 'failed');
    expect(closed.delivery.lastError).toContain('ECONNREFUSED');

    for (const { requestId } of [refused, closed]) {
      const forReader = await page(reader, `/jobs/${requestId}`);
      expect(forReader).toContain('Webhook deliveries');
      expect(forReader).toContain('an attempt failed');
      expect(forReader).not.toContain('intranet-banner');
      expect(forReader).not.toContain('ECONNREFUSED');
      expect(forReader).not.toMatch(/HTTP 403|>403</);
    }
    expect(await page(admin, `/jobs/${refused.requestId}`)).toContain('intranet-banner');
    expect(await page(admin, `/jobs/${closed.requestId}`)).toContain('ECONNREFUSED');

    // The queue dashboards: the read-only one, for auditors (it holds every owner's jobs), and the admin one.
    const failedJobs = '/api/queues?activeQueue=notify&status=failed&page=1&jobsPerPage=50';
    expect(await page(reader, `/queues${failedJobs}`)).not.toContain(refused.delivery.id);
    const readOnly = await page(auditor, `/queues${failedJobs}`);
    expect(readOnly).toContain(refused.delivery.id);
    expect(readOnly).not.toContain('intranet-banner');
    expect(readOnly).not.toContain('ECONNREFUSED');
    const full = await page(admin, `/queues-admin${failedJobs}`);
    expect(full).toContain('intranet-banner');
    expect(full).toContain('ECONNREFUSED');
    // What is stored stays whole, for admins and the log.
    const [delivery] = await deliveriesOfRequest(td.daemon.history.store, refused.requestId);
    expect(delivery?.lastStatus).toBe(403);
  });
});
