import { chmodSync, mkdirSync, mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { type CountingProxy, startCountingProxy } from '../chaos/counting-proxy.js';
import { DaemonUnderTest } from '../chaos/daemon.js';
import { trackDir } from '../chaos/processes.js';
import { ExternalRedis } from '../chaos/redis-server.js';
import { SimUpstream } from '../chaos/upstream.js';
import { startTestPostgres, type TestPostgres } from '../helpers/postgres.js';
import { startWebhookReceiver, type WebhookReceiver } from '../helpers/webhook-receiver.js';
import { writeCronPipeline } from './cron-pipeline.js';
import { retentionSettings } from './retention.js';

export const LLM_MODEL = 'soak-summarizer';

/** Everything a soak runs against: the simulator (also its LLM endpoint) behind the counting proxy, Redis, maybe PostgreSQL, a webhook receiver, the daemon. */
export interface SoakWorld {
  root: string;
  sim: SimUpstream;
  proxy: CountingProxy;
  redis: ExternalRedis;
  postgres?: { server: TestPostgres; url: string };
  receiver: WebhookReceiver;
  daemon: DaemonUnderTest;
  /** A folder every job user may write: the failing-then-succeeding jobs leave their mark here. */
  flagsDir: string;
  close(): Promise<void>;
}

export async function makeSoakWorld(base: string, options: { minutes: number; postgres: boolean }): Promise<SoakWorld> {
  const root = join(base, 'world');
  mkdirSync(root, { recursive: true, mode: 0o700 });
  // The simulator runs jobs as its job user (as root) who cannot enter the 0700 base: a folder of its own.
  const flagsDir = trackDir(mkdtempSync(join(tmpdir(), 'schedflow-soak-flags-')));
  chmodSync(flagsDir, 0o1777);

  // The simulator serves the LLM endpoint too (src/sim/llm), with a key of its own.
  const llmKeys = join(root, 'llm-keys');
  const llmKey = `sk-soak-${Date.now().toString(36)}0123456789abcdef`;
  writeFileSync(llmKeys, `${llmKey}\n`, { mode: 0o600 });
  const llmKeyFile = join(root, 'llm-key');
  writeFileSync(llmKeyFile, `${llmKey}\n`, { mode: 0o600 });
  const simConfig = join(root, 'sim.json');
  writeFileSync(simConfig, JSON.stringify({ llm: { keysFile: llmKeys, models: [LLM_MODEL] } }));
  const simDir = join(root, 'sim');
  mkdirSync(simDir, { mode: 0o700 });
  // Finished jobs leave the controller's listing after 10 minutes (Slurm's default MinJobAge
  // is 5): polling an ever longer listing would be growth of the harness's making.
  const sim = await SimUpstream.start(simDir, { capacity: 100_000, refillPerSecond: 100_000 }, [
    ...['--min-job-age', '600', '--config', simConfig],
  ]);
  const proxy = await startCountingProxy(sim.url);
  const redis = await ExternalRedis.start(join(root, 'redis'));
  const receiver = await startWebhookReceiver();

  let postgres: SoakWorld['postgres'];
  if (options.postgres) {
    const server = await startTestPostgres();
    postgres = { server, url: await server.createDatabase('soak') };
  }

  const daemon = new DaemonUnderTest(join(root, 'daemon'), {
    schedulerUrl: proxy.url,
    redisUrl: redis.url,
    tokenScopes: 'submit,read,cancel',
    settings: {
      ...retentionSettings(options.minutes),
      SCHEDFLOW_WEBHOOK_ALLOW_HOSTS: '127.0.0.1',
      SCHEDFLOW_LLM_URL: sim.url,
      SCHEDFLOW_LLM_MODEL: LLM_MODEL,
      SCHEDFLOW_LLM_API_KEY_FILE: llmKeyFile,
      // Summaries only for requests that ask (summarize: true); the day's budget never the limit.
      SCHEDFLOW_LLM_DAILY_REQUESTS: '1000000',
      ...(postgres && {
        DATABASE_URL: postgres.url,
        SCHEDFLOW_WEBHOOK_SECRET: 'soak-webhook-secret-0123456789abcdef',
      }),
    },
  });
  await daemon.setup();
  writeCronPipeline(join(daemon.configDir, 'pipelines'), receiver.url);
  await daemon.start();
  return {
    root,
    sim,
    proxy,
    redis,
    postgres,
    receiver,
    daemon,
    flagsDir,
    close: async () => {
      await daemon.stop(10_000).catch(() => {});
      await receiver.stop();
      await proxy.close();
      await sim.stop();
      await redis.kill();
      await postgres?.server.stop();
    },
  };
}
