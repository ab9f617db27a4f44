import { describe, expect, it } from 'vitest';
import { loadDaemonConfig } from '../../src/config/daemon-config.js';
import { redactedUrl } from '../../src/db/open-history.js';
import { ConfigError } from '../../src/errors.js';
import { parseListenAddress } from '../../src/lib/listen-address.js';

describe('loadDaemonConfig', () => {
  it('takes tuning settings from SCHEDFLOW_* variables, flags over variables', () => {
    const config = loadDaemonConfig(
      {
        SCHEDFLOW_LOCK_DURATION_MS: '3000',
        SCHEDFLOW_POLL_FLOOR_MS: ' 750 ',
        SCHEDFLOW_QUEUE_PREFIX: 'site-a',
        SCHEDFLOW_DATA_DIR: '/var/lib/schedflow',
      },
      { dataDir: '/tmp/override' },
    );
    expect(config).toMatchObject({
      lockDurationMs: 3000,
      pollFloorMs: 750,
      queuePrefix: 'site-a',
      dataDir: '/tmp/override',
      shutdownGraceMs: 10_000,
    });
  });

  it('names the variable when its value is not a whole number', () => {
    expect(() => loadDaemonConfig({ SCHEDFLOW_LOST_GRACE_MS: '5m' })).toThrow(ConfigError);
    expect(() => loadDaemonConfig({ SCHEDFLOW_LOST_GRACE_MS: '5m' })).toThrow(/^SCHEDFLOW_LOST_GRACE_MS: /);
    expect(() => loadDaemonConfig({ SCHEDFLOW_SUBMIT_CONCURRENCY: '0' })).toThrow(/SCHEDFLOW_SUBMIT_CONCURRENCY/);
  });

  it('reads the numbers of the daemon, the summaries and the LLM with one reader, saying the same', () => {
    const llm = { SCHEDFLOW_LLM_URL: 'http://llm.invalid', SCHEDFLOW_LLM_MODEL: 'm' };
    for (const name of ['SCHEDFLOW_LOST_GRACE_MS', 'SCHEDFLOW_SUMMARY_ATTEMPTS', 'SCHEDFLOW_LLM_TIMEOUT_MS']) {
      expect(() => loadDaemonConfig({ ...llm, [name]: ' 5m ' }), name).toThrow(`${name}: a whole number, not "5m"`);
    }
    const config = loadDaemonConfig({ ...llm, SCHEDFLOW_SUMMARY_ATTEMPTS: '7', SCHEDFLOW_LLM_TIMEOUT_MS: '1500' });
    expect([config.summaries.attempts, config.summaries.llm?.timeoutMs]).toEqual([7, 1500]);
    // A flag wins over its variable, even one that is not a number.
    expect(loadDaemonConfig({ SCHEDFLOW_API_RATE_LIMIT: 'x' }, { apiRateLimitPerMin: 9 }).apiRateLimitPerMin).toBe(9);
  });

  it('reads a listen address with the one reader the HTTP server uses', () => {
    expect(loadDaemonConfig({ SCHEDFLOW_LISTEN: ' [::1]:0 ' }).listen).toBe('[::1]:0');
    for (const listen of ['8080', 'localhost', 'a b:1', '127.0.0.1:65536']) {
      expect(() => loadDaemonConfig({}, { listen }), listen).toThrow(/^listen: host:port, e\.g\. 127\.0\.0\.1:8080/);
    }
    expect(parseListenAddress('[::1]:8080')).toEqual({ host: '::1', port: 8080 });
    expect(() => parseListenAddress('127.0.0.1:65536')).toThrow(/^--listen "127.0.0.1:65536": expected host:port/);
  });

  it('reads the webhook allow-list, comma-separated; none by default; a bad entry named with the variable', () => {
    expect(loadDaemonConfig({}).webhookAllowHosts).toEqual([]);
    expect(
      loadDaemonConfig({ SCHEDFLOW_WEBHOOK_ALLOW_HOSTS: ' hooks.lab.internal, 10.0.0.0/8 ,,127.0.0.1' })
        .webhookAllowHosts,
    ).toEqual(['hooks.lab.internal', '10.0.0.0/8', '127.0.0.1']);
    expect(() => loadDaemonConfig({ SCHEDFLOW_WEBHOOK_ALLOW_HOSTS: 'https://hooks.lab:8443' })).toThrow(
      /^SCHEDFLOW_WEBHOOK_ALLOW_HOSTS: "https:\/\/hooks.lab:8443" is not a host name/,
    );
    expect(() => loadDaemonConfig({ SCHEDFLOW_WEBHOOK_ALLOW_HOSTS: '10.0.0.0/40' })).toThrow(ConfigError);
  });

  it('refuses separate roles without a shared Redis', () => {
    expect(() => loadDaemonConfig({}, { roles: ['worker'] })).toThrow(/set REDIS_URL/);
  });

  it('takes a PostgreSQL history with a shared Redis and one webhook secret, and never says its password', () => {
    const url = 'postgres://schedflow:pa55word@db.example.org:5432/schedflow';
    const shared = { REDIS_URL: 'redis://:r3dis@10.0.0.5:6379', SCHEDFLOW_WEBHOOK_SECRET: 'one-key' };
    const config = loadDaemonConfig({ ...shared, DATABASE_URL: url });
    expect(config.databaseUrl?.reveal()).toBe(url);
    expect(JSON.stringify(config)).not.toContain('pa55word');
    const refusals: [Record<string, string>, RegExp][] = [
      [{ SCHEDFLOW_WEBHOOK_SECRET: 'one-key', DATABASE_URL: url }, /set REDIS_URL to the Redis they share/],
      [
        { REDIS_URL: shared.REDIS_URL, DATABASE_URL: url },
        /set SCHEDFLOW_WEBHOOK_SECRET to the same key on every host/,
      ],
      [{ ...shared, DATABASE_URL: 'mysql://u:pa55word@h/db' }, /must be a postgres:\/\/ URL \(got mysql:\/\/…\)/],
      [{ ...shared, DATABASE_URL: 'pa55word' }, /DATABASE_URL is not a URL/],
    ];
    for (const [env, message] of refusals) {
      let error: unknown;
      try {
        loadDaemonConfig(env);
      } catch (caught) {
        error = caught;
      }
      expect(error).toBeInstanceOf(ConfigError);
      expect((error as Error).message).toMatch(message);
      expect((error as Error).message).not.toContain('pa55word');
    }
  });
});

describe('redactedUrl', () => {
  it('hides the password, in the userinfo or the query', () => {
    expect(redactedUrl('postgres://u:s3cret@h:5432/db')).toBe('postgres://u:***@h:5432/db');
    expect(redactedUrl('postgres://u@h/db?password=s3cret&sslmode=require')).toBe('postgres://u@h/db?…');
    expect(redactedUrl('postgres://u@h/db')).toBe('postgres://u@h/db');
    expect(redactedUrl('not a url s3cret')).toBe('postgres://…');
  });
});
