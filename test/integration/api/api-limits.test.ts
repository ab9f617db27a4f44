import { createServer } from 'node:net';
import { describe, expect, it } from 'vitest';
import { loadDaemonConfig } from '../../../src/config/daemon-config.js';
import { createToken } from '../../../src/db/tokens.js';
import { createLogger } from '../../../src/logger.js';
import { startDaemon } from '../../../src/main.js';
import { apiClient, errorOf } from '../../helpers/api.js';
import { daemonTestEnv, startTestDaemon } from '../../helpers/daemon.js';
import { waitFor } from '../../helpers/http.js';
import { checkedFetch } from '../../helpers/openapi-check.js';

/** The per-token rate limit, and readiness when Redis or a scheduler is missing. */

const env = daemonTestEnv();

describe('rate limit', () => {
  it('429 with Retry-After and a JSON error once a token has spent its requests; other tokens and probes go on', async () => {
    const sim = await env.sim();
    const td = await env.daemon(sim.url, { apiRateLimitPerMin: 3 });
    const api = apiClient(td);
    const busy = await api.token(['read']);
    for (let i = 0; i < 3; i++) {
      const r = await api.call('GET', '/api/v1/jobs', { token: busy });
      expect(r.status).toBe(200);
      expect(r.headers.get('x-ratelimit-limit')).toBe('3');
    }
    const limited = await api.call('GET', '/api/v1/jobs', { token: busy });
    expect(limited.status).toBe(429);
    const retryAfter = Number(limited.headers.get('retry-after'));
    expect(retryAfter).toBeGreaterThan(0);
    expect(retryAfter).toBeLessThanOrEqual(60);
    expect(errorOf(limited)).toMatchObject({ code: 'SCHEDFLOW_ERR_RATE_LIMITED' });
    expect(errorOf(limited).message).toMatch(/3 requests per minute/);

    const other = await api.token(['read']);
    expect((await api.call('GET', '/api/v1/jobs', { token: other })).status).toBe(200);
    for (let i = 0; i < 5; i++) expect((await api.call('GET', '/healthz')).status).toBe(200);
  });

  it('is one limit for the deployment: a token spends it across every web process', async () => {
    const sim = await env.sim();
    const td = await env.daemon(sim.url, { apiRateLimitPerMin: 4 });
    // A second process with the web role only, on the same data dir, Redis and queue prefix.
    const web = await startDaemon(
      loadDaemonConfig(
        {},
        {
          dataDir: td.dataDir,
          configDir: td.configDir,
          // The same history: PostgreSQL's too, under npm run test:postgres.
          databaseUrl: td.daemon.config.databaseUrl,
          webhookSecret: td.daemon.config.webhookSecret,
          redisUrl: env.redis.url,
          queuePrefix: td.daemon.config.queuePrefix,
          listen: '127.0.0.1:0',
          roles: ['web'],
          apiRateLimitPerMin: 4,
        },
      ),
      createLogger({ level: 'silent' }),
    );
    env.defer(() => web.stop());
    const { token } = await createToken(td.daemon.history.store, {
      owner: 'default',
      name: 'two-webs',
      scopes: ['read'],
    });
    const get = async (base: string | null) =>
      (await checkedFetch(`${base}/api/v1/jobs`, { headers: { authorization: `Bearer ${token}` } })).status;
    const statuses = [];
    for (let i = 0; i < 6; i++) statuses.push(await get(i % 2 ? web.apiUrl : td.daemon.apiUrl));
    expect(statuses).toEqual([200, 200, 200, 200, 429, 429]);
  });
});

describe('/readyz', () => {
  it('503 naming Redis while it is down, 200 again once it is back; /healthz stays 200', async () => {
    const sim = await env.sim();
    const td = await env.daemon(sim.url);
    const api = apiClient(td);
    expect((await api.call('GET', '/readyz')).status).toBe(200);

    await env.redis.kill();
    try {
      const down = await api.call('GET', '/readyz');
      expect(down.status).toBe(503);
      const body = down.json as { status: string; checks: Record<string, string> };
      expect(body.status).toBe('not ready');
      expect(body.checks.redis).not.toBe('ok');
      expect(body.checks.history).toBe('ok');
      expect((await api.call('GET', '/healthz')).status).toBe(200);
      // Metrics still answer, without the queue counts Redis would give.
      const metrics = await api.call('GET', '/metrics');
      expect(metrics.status).toBe(200);
      expect(metrics.text).not.toContain('schedflow_queue_jobs{');
    } finally {
      await env.redis.start();
    }
    await waitFor(async () => ((await api.call('GET', '/readyz')).status === 200 ? true : undefined), {
      what: '/readyz to answer 200 again',
      timeoutMs: 10_000,
    });
  });

  it('503 naming a scheduler that has not connected yet', async () => {
    // A port nobody listens on: the client keeps trying in the background.
    const port = await new Promise<number>((resolve) => {
      const server = createServer().listen(0, '127.0.0.1', () => {
        const { port } = server.address() as { port: number };
        server.close(() => resolve(port));
      });
    });
    const td = await startTestDaemon(`http://127.0.0.1:${port}`, env.redis.url, {}, { retries: { attempts: 1 } });
    env.defer(() => td.stop());
    const r = await apiClient(td).call('GET', '/readyz');
    expect(r.status).toBe(503);
    const body = r.json as { checks: Record<string, string> };
    expect(body.checks).toMatchObject({ redis: 'ok', history: 'ok' });
    expect(body.checks['scheduler:test']).toMatch(/not connected/);
  });
});
