import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { loadDaemonConfig } from '../../src/config/daemon-config.js';
import { grantOf } from '../../src/http/ui/oidc-mapping.js';

const MAP = [
  { value: 'hpc-admins', scopes: ['admin' as const] },
  { value: 'auditors', scopes: ['read' as const, 'audit' as const] },
  { value: 'lab-a', owner: 'lab-a', scopes: ['read' as const, 'submit' as const, 'cancel' as const] },
  { value: 'lab-b', owner: 'lab-b', scopes: ['read' as const] },
];

describe('single sign-on: claim values to a grant', () => {
  it('refuses a user in no mapped group', () => {
    expect(grantOf(MAP, ['visitors'])).toBeNull();
    expect(grantOf(MAP, [])).toBeNull();
  });

  it('takes the first owner named, and the scopes of the entries that name it or none', () => {
    expect(grantOf(MAP, ['lab-a'])).toEqual({ owner: 'lab-a', scopes: ['submit', 'read', 'cancel'] });
    expect(grantOf(MAP, ['hpc-admins'])).toEqual({ owner: 'default', scopes: ['admin'] });
    expect(grantOf(MAP, ['auditors', 'lab-a'])).toEqual({
      owner: 'lab-a',
      scopes: ['submit', 'read', 'cancel', 'audit'],
    });
    // lab-b's entry names another owner: it adds nothing to a user acting as lab-a.
    expect(grantOf(MAP, ['lab-b', 'lab-a'])).toEqual({ owner: 'lab-a', scopes: ['submit', 'read', 'cancel'] });
  });
});

describe('single sign-on: its settings file', () => {
  let dir = '';
  afterEach(() => {
    if (dir) rmSync(dir, { recursive: true, force: true });
  });

  it('reads <config>/oidc.yaml, with its secret file beside it, and refuses a wrong one naming it', () => {
    dir = mkdtempSync(join(tmpdir(), 'schedflow-oidc-settings-'));
    writeFileSync(
      join(dir, 'oidc.yaml'),
      [
        'issuer: https://idp.example.org/realms/lab',
        'clientId: schedflow',
        'clientSecretFile: oidc-secret',
        'map:',
        '  - { value: lab-a, owner: lab-a, scopes: [read] }',
      ].join('\n'),
    );
    const config = loadDaemonConfig({ SCHEDFLOW_CONFIG_DIR: dir });
    expect(config.oidc).toMatchObject({
      issuer: 'https://idp.example.org/realms/lab',
      clientSecretFile: join(dir, 'oidc-secret'),
      claim: 'groups',
      scopes: ['openid', 'profile', 'email'],
      sessionMaxAgeSec: 28_800,
    });
    writeFileSync(
      join(dir, 'oidc.yaml'),
      'issuer: https://idp.example.org\nclientId: x\nclientSecret: inline\nmap: []\n',
    );
    expect(() => loadDaemonConfig({ SCHEDFLOW_CONFIG_DIR: dir })).toThrow(/oidc/);
    expect(() => loadDaemonConfig({ SCHEDFLOW_OIDC_CONFIG: join(dir, 'missing.yaml') })).toThrow(
      /SCHEDFLOW_OIDC_CONFIG/,
    );
  });

  it('wants a redirect URL when the daemon listens on every address', () => {
    const oidc = { issuer: 'https://idp.example.org', clientId: 'x', map: [{ value: 'g', scopes: ['read' as const] }] };
    expect(() => loadDaemonConfig({}, { listen: '0.0.0.0:8080', oidc })).toThrow(/redirectUrl/);
    expect(loadDaemonConfig({}, { listen: '127.0.0.1:8080', oidc }).oidc?.name).toBe('single sign-on');
  });
});
