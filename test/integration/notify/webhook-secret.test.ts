import { chmodSync, mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { inspect } from 'node:util';
import { afterEach, describe, expect, it } from 'vitest';
import { loadDaemonConfig } from '../../../src/config/daemon-config.js';
import { ConfigError } from '../../../src/errors.js';
import { Secret } from '../../../src/lib/secret.js';
import { loadWebhookSecret } from '../../../src/notify/webhook-secret.js';

const dirs: string[] = [];
function dataDir(): string {
  const dir = mkdtempSync(join(tmpdir(), 'schedflow-secret-'));
  dirs.push(dir);
  return join(dir, 'data');
}

afterEach(() => {
  for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true });
});

describe('the webhook secret', () => {
  it('is made at first start: 32 random bytes in hex, readable only by the owner, kept after', () => {
    const dir = dataDir();
    const first = loadWebhookSecret(dir);
    const file = join(dir, 'webhook-secret');
    expect(first.source).toBe(file);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(first.secret.reveal()).toMatch(/^[0-9a-f]{64}$/);
    expect(readFileSync(file, 'utf8').trim()).toBe(first.secret.reveal());
    expect(loadWebhookSecret(dir).secret.reveal()).toBe(first.secret.reveal());
    expect(loadWebhookSecret(dataDir()).secret.reveal()).not.toBe(first.secret.reveal());
  });

  it('a file other users can read is refused, saying how to fix it', () => {
    const dir = dataDir();
    loadWebhookSecret(dir);
    const file = join(dir, 'webhook-secret');
    chmodSync(file, 0o640);
    expect(() => loadWebhookSecret(dir)).toThrow(ConfigError);
    expect(() => loadWebhookSecret(dir)).toThrow(`run chmod 600 ${file}`);
  });

  it('an empty file is refused', () => {
    const dir = dataDir();
    loadWebhookSecret(dir);
    writeFileSync(join(dir, 'webhook-secret'), '\n');
    expect(() => loadWebhookSecret(dir)).toThrow(/is empty/);
  });

  it('SCHEDFLOW_WEBHOOK_SECRET wins over the file, and never shows in the configuration', () => {
    const config = loadDaemonConfig({ SCHEDFLOW_WEBHOOK_SECRET: ' from-the-environment \n' }, { dataDir: dataDir() });
    expect(config.webhookSecret?.reveal()).toBe('from-the-environment');
    const loaded = loadWebhookSecret(config.dataDir, config.webhookSecret);
    expect(loaded).toMatchObject({ source: 'SCHEDFLOW_WEBHOOK_SECRET' });
    expect(loaded.secret.reveal()).toBe('from-the-environment');
    expect(JSON.stringify(config)).not.toContain('from-the-environment');
    expect(inspect(config)).not.toContain('from-the-environment');
    expect(`${config.webhookSecret}`).toBe('[redacted]');
  });

  it('the notify settings come from SCHEDFLOW_NOTIFY_* variables', () => {
    const config = loadDaemonConfig(
      {
        SCHEDFLOW_NOTIFY_EVERY_MS: '500',
        SCHEDFLOW_NOTIFY_ATTEMPTS: '3',
        SCHEDFLOW_NOTIFY_BACKOFF_MS: '100',
        SCHEDFLOW_NOTIFY_TIMEOUT_MS: '4000',
      },
      { dataDir: dataDir() },
    );
    expect(config).toMatchObject({
      notifyEveryMs: 500,
      notifyAttempts: 3,
      notifyBackoffMs: 100,
      notifyTimeoutMs: 4000,
    });
    const defaults = loadDaemonConfig({}, {});
    expect(defaults).toMatchObject({
      notifyEveryMs: 1000,
      notifyAttempts: 12,
      notifyBackoffMs: 2000,
      notifyTimeoutMs: 10_000,
    });
    expect(defaults.webhookSecret).toBeUndefined();
    expect(() => loadDaemonConfig({ SCHEDFLOW_NOTIFY_ATTEMPTS: 'many' })).toThrow(/SCHEDFLOW_NOTIFY_ATTEMPTS/);
  });

  it('a Secret given as a setting is used as it is', () => {
    const secret = new Secret('given');
    expect(loadWebhookSecret(dataDir(), secret).secret).toBe(secret);
  });
});
