import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Writable } from 'node:stream';
import { pino } from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadDaemonConfig } from '../../../src/config/daemon-config.js';
import { deliveriesOfRequest } from '../../../src/db/webhooks.js';
import { Secret } from '../../../src/lib/secret.js';
import { REDACT_PATHS } from '../../../src/logger.js';
import { startDaemon } from '../../../src/main.js';
import { verifySignature } from '../../../src/notify/signature.js';
import { jobSpecSchema } from '../../../src/sched/job-spec.js';
import { waitFor } from '../../helpers/http.js';
import { writeProfile } from '../../helpers/profile-file.js';
import { startTestRedis, type TestRedis } from '../../helpers/redis.js';
import { startSim, type TestSim } from '../../helpers/sim.js';
import { startWebhookReceiver } from '../../helpers/webhook-receiver.js';

let redis: TestRedis;
let sim: TestSim;

beforeAll(async () => {
  redis = await startTestRedis();
  sim = await startSim();
});

afterAll(async () => {
  await sim.stop();
  await redis.stop();
});

describe('what webhooks leave in the log', () => {
  it('the receiver by origin only, never its path, query, user info or the signing secret', async () => {
    const root = mkdtempSync(join(tmpdir(), 'schedflow-notify-log-'));
    const lines: string[] = [];
    const logger = pino(
      { level: 'debug', redact: { paths: REDACT_PATHS, censor: '[redacted]' } },
      new Writable({
        write(chunk, _encoding, done) {
          lines.push(String(chunk));
          done();
        },
      }),
    );
    const receiver = await startWebhookReceiver();
    receiver.answer(500, { status: 403, body: 'no' });
    writeProfile(join(root, 'config'), sim.url);
    const config = loadDaemonConfig(
      {},
      {
        dataDir: join(root, 'data'),
        configDir: join(root, 'config'),
        redisUrl: redis.url,
        queuePrefix: `test-${Math.random().toString(36).slice(2, 10)}`,
        // Any free port: 8080, the default, is the user's own daemon's (`npm start`) while tests run.
        listen: '127.0.0.1:0',
        pollFloorMs: 500,
        shutdownGraceMs: 2000,
        notifyEveryMs: 200,
        notifyBackoffMs: 100,
        webhookSecret: new Secret('SIGNING-SECRET-VALUE'),
        // The receiver is on loopback, which webhooks are refused by default.
        webhookAllowHosts: ['127.0.0.1'],
      },
    );
    const daemon = await startDaemon(config, logger);
    try {
      const port = new URL(receiver.url).port;
      const url = `http://hook-user:PASSWORD-IN-URL@127.0.0.1:${port}/hooks/TOKEN-IN-PATH?key=TOKEN-IN-QUERY`;
      const id = await daemon.submit({
        spec: jobSpecSchema.parse({
          name: 'log-test',
          script: '#!/bin/sh\ntrue\n',
          current_working_directory: sim.workDir,
        }),
        owner: 'default',
        actor: 'test',
        origin: 'api',
        webhookUrl: url,
      });
      const delivery = await waitFor(
        async () => {
          const row = (await deliveriesOfRequest(daemon.history.store, id))[0];
          return row?.state === 'failed' ? row : undefined;
        },
        { what: 'the delivery to fail', timeoutMs: 20_000, intervalMs: 50 },
      );
      expect(delivery).toMatchObject({ attempts: 2, lastStatus: 403 });

      // The receiver got the whole URL, user info as Basic credentials, and a signature made with the given secret.
      const [first] = receiver.calls;
      expect(first?.path).toBe('/hooks/TOKEN-IN-PATH?key=TOKEN-IN-QUERY');
      expect(first?.headers.authorization).toBe(`Basic ${Buffer.from('hook-user:PASSWORD-IN-URL').toString('base64')}`);
      expect(verifySignature(first?.body ?? '', first?.headers['schedflow-signature'], 'SIGNING-SECRET-VALUE')).toBe(
        true,
      );

      const log = lines.join('');
      expect(log).toContain('webhook attempt failed; will retry');
      expect(log).toContain('webhook delivery refused; not retried');
      expect(log).toContain(`"receiver":"http://127.0.0.1:${port}"`);
      expect(log).toContain('webhooks are signed with the secret in SCHEDFLOW_WEBHOOK_SECRET');
      for (const secret of [
        'TOKEN-IN-PATH',
        'TOKEN-IN-QUERY',
        'PASSWORD-IN-URL',
        'hook-user',
        'SIGNING-SECRET-VALUE',
      ]) {
        expect(log).not.toContain(secret);
        expect(delivery.lastError).not.toContain(secret);
      }
    } finally {
      await daemon.stop();
      await receiver.stop();
      rmSync(root, { recursive: true, force: true });
    }
  });
});
