import { describe, expect, it } from 'vitest';
import { loadDaemonConfig } from '../../src/config/daemon-config.js';
import { ConfigError } from '../../src/errors.js';

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

  it('refuses separate roles without a shared Redis', () => {
    expect(() => loadDaemonConfig({}, { roles: ['worker'] })).toThrow(/set REDIS_URL/);
  });
});
