import { mkdirSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { listAudit } from '../../../src/db/audit.js';
import { openDatabase } from '../../../src/db/database.js';
import { cleanEnv, runCli } from '../../helpers/cli-process.js';
import { writeProfile } from '../../helpers/profile-file.js';

/**
 * `schedflow tokens create|list|update|revoke` with owners, bindings and quotas, as an operator
 * types them: before a first start, in a data dir named outright, with the config's profiles.
 */

const roots: string[] = [];
afterEach(() => {
  for (const root of roots.splice(0)) rmSync(root, { recursive: true, force: true });
});

function setUp() {
  const root = mkdtempSync(join(tmpdir(), 'schedflow-tokens-cli-'));
  roots.push(root);
  const dataDir = join(root, 'data');
  mkdirSync(dataDir, { mode: 0o700 });
  const configDir = join(root, 'config');
  // One profile, `test`: the names --profiles may give.
  writeProfile(configDir, 'http://127.0.0.1:9');
  const env = cleanEnv({ USER: 'alice' });
  const cli = (...args: string[]) => runCli(['tokens', ...args, '--data-dir', dataDir], { env, cwd: root });
  return { dataDir, configDir, cli };
}

interface ListedToken {
  name: string;
  owner: string;
  scopes: string[];
  profiles: string[] | null;
  max_in_flight: number | null;
  max_per_day: number | null;
}

describe('schedflow tokens', () => {
  it('creates a token with an owner, profiles and quotas, lists them, and updates them in place', async () => {
    const { dataDir, configDir, cli } = setUp();
    const made = await cli(
      'create',
      '--name',
      'lims-a',
      '--owner',
      'lab-a',
      '--scopes',
      'read,submit,cancel',
      '--profiles',
      'test',
      '--max-in-flight',
      '5',
      '--max-per-day',
      '100',
      '--config',
      configDir,
    );
    expect(made.code, made.stderr).toBe(0);
    expect(made.stderr).toContain('token "lims-a" (read, submit, cancel) created, owner "lab-a"');
    const token = made.stdout.trim();
    const plain = await cli('create', '--name', 'auditor', '--scopes', 'audit');
    expect(plain.code, plain.stderr).toBe(0);

    const table = await cli('list');
    expect(table.stdout).toMatch(/NAME\s+OWNER\s+SCOPES\s+PROFILES\s+IN FLIGHT\s+PER DAY/);
    expect(table.stdout).toMatch(/lims-a\s+lab-a\s+read,submit,cancel\s+test\s+5\s+100/);
    expect(table.stdout).toMatch(/auditor\s+auditor\s+audit\s+\*\s+-\s+-/);
    const listed = JSON.parse((await cli('list', '--json')).stdout) as ListedToken[];
    expect(
      listed.map(({ name, owner, scopes, profiles, max_in_flight, max_per_day }) => ({
        name,
        owner,
        scopes,
        profiles,
        max_in_flight,
        max_per_day,
      })),
    ).toEqual([
      {
        name: 'lims-a',
        owner: 'lab-a',
        scopes: ['read', 'submit', 'cancel'],
        profiles: ['test'],
        max_in_flight: 5,
        max_per_day: 100,
      },
      { name: 'auditor', owner: 'auditor', scopes: ['audit'], profiles: null, max_in_flight: null, max_per_day: null },
    ]);

    const updated = await cli('update', 'lims-a', '--owner', 'lab-b', '--any-profile', '--max-in-flight', 'none');
    expect(updated.code, updated.stderr).toBe(0);
    expect(updated.stderr).toContain('token "lims-a" updated: owner lab-b');
    const after = (JSON.parse((await cli('list', '--json')).stdout) as ListedToken[])[0];
    expect(after).toMatchObject({ owner: 'lab-b', profiles: null, max_in_flight: null, max_per_day: 100 });

    expect((await cli('revoke', 'lims-a')).code).toBe(0);

    const db = openDatabase(join(dataDir, 'history.sqlite'));
    try {
      const rows = (await listAudit(db.store, { limit: 10 })).reverse();
      expect(rows.map((r) => [r.action, r.actor, r.owner, r.target])).toEqual([
        ['token.create', 'cli:alice', 'lab-a', 'token:lims-a'],
        ['token.create', 'cli:alice', 'auditor', 'token:auditor'],
        ['token.update', 'cli:alice', 'lab-b', 'token:lims-a'],
        ['token.revoke', 'cli:alice', 'lab-b', 'token:lims-a'],
      ]);
      expect(rows[2]?.detail).toBe('owner: lab-a -> lab-b; profiles: test -> any; max_in_flight: 5 -> none');
      expect(JSON.stringify(rows)).not.toContain(token);
    } finally {
      db.close();
    }
    // Seven CLI processes one after another: slower than the default limit on a busy machine.
  }, 90_000);

  it('refuses an unknown profile (listing the known ones), a bad owner or quota, and an update of nothing', async () => {
    const { configDir, cli } = setUp();
    const unknown = await cli(
      'create',
      '--name',
      'x',
      '--scopes',
      'read',
      '--profiles',
      'test,nope',
      '--config',
      configDir,
    );
    expect(unknown.code).toBe(2);
    expect(unknown.stderr).toMatch(/--profiles: no profile "nope" in .*profiles \(have: test\)/);
    const owner = await cli('create', '--name', 'x', '--scopes', 'read', '--owner', 'lab a');
    expect(owner.code).toBe(2);
    expect(owner.stderr).toContain('--owner "lab a"');
    const quota = await cli('create', '--name', 'x', '--scopes', 'read', '--max-in-flight', 'none');
    expect(quota.code).toBe(2);
    expect(quota.stderr).toContain('--max-in-flight "none": a whole number, 0 or more');
    expect((await cli('list', '--json')).stdout.trim()).toBe('[]');

    expect((await cli('create', '--name', 'x', '--scopes', 'read')).code).toBe(0);
    const nothing = await cli('update', 'x');
    expect(nothing.code).toBe(2);
    expect(nothing.stderr).toContain('nothing to change');
    const both = await cli('update', 'x', '--profiles', 'test', '--any-profile', '--config', configDir);
    expect(both.code).toBe(2);
    const missing = await cli('update', 'nobody', '--max-per-day', '3');
    expect(missing.code).toBe(2);
    expect(missing.stderr).toContain('no live token named "nobody"');
  }, 90_000);
});
