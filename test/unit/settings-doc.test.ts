import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { daemonConfigSchema } from '../../src/config/daemon-config.js';
import {
  CONFIGURATION_DOC,
  renderSettingsTable,
  replaceGeneratedSection,
  settingsRows,
} from '../docs/settings-table.js';

describe('the settings table of docs/configuration.md', () => {
  it('is the one the code generates (npm run docs:settings writes it)', () => {
    const page = readFileSync(CONFIGURATION_DOC, 'utf8');
    expect(page, 'docs/configuration.md differs from the code: run `npm run docs:settings`').toBe(
      replaceGeneratedSection(page, renderSettingsTable()),
    );
  });

  it('has a row for every setting, with the flags and variables the code reads', () => {
    const rows = settingsRows();
    expect(rows.map((r) => r.setting).filter((s) => s !== '—')).toEqual(
      Object.keys(daemonConfigSchema.shape).map((k) => `\`${k}\``),
    );
    const byKey = new Map(rows.map((r) => [r.setting, r]));
    expect(byKey.get('`dataDir`')).toMatchObject({ flag: '`--data-dir <dir>`', env: '`SCHEDFLOW_DATA_DIR`' });
    expect(byKey.get('`configDir`')).toMatchObject({ flag: '`--config <dir>`', env: '`SCHEDFLOW_CONFIG_DIR`' });
    expect(byKey.get('`pipelinesDir`')).toMatchObject({ env: '`SCHEDFLOW_PIPELINES_DIR`', defaultValue: '—' });
    expect(byKey.get('`redisUrl`')).toMatchObject({ flag: '—', env: '`REDIS_URL`' });
    expect(byKey.get('`pollFloorMs`')).toMatchObject({ env: '`SCHEDFLOW_POLL_FLOOR_MS`', defaultValue: '`2000`' });
    expect(byKey.get('`roles`')).toMatchObject({ defaultValue: '`worker,scheduler,web`' });
    expect(rows.find((r) => r.flag.startsWith('`--log-level'))).toMatchObject({ defaultValue: '`info`' });
  });
});
