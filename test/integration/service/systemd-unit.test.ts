import { spawnSync } from 'node:child_process';
import { chmodSync, cpSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { REPO } from '../../helpers/cli-process.js';

/**
 * The systemd unit shipped in the package (config/systemd/schedflow.service), checked by
 * systemd's own `systemd-analyze verify`: unknown keys, bad values and a command it cannot find
 * are errors here, though systemd itself only logs them and starts the unit without them (a
 * misspelt hardening line would silently harden nothing). test/setup.sh installs the `systemd`
 * package where systemd-analyze is missing; without it this file fails rather than skips.
 *
 * Verified inside a root of its own (`--root`): the unit in etc/systemd/system, systemd's
 * own units copied beside it (the targets it names), and a `schedflow` in usr/bin, where
 * `npm install -g` puts it (ExecStart names the command without a path).
 */

const UNIT = join(REPO, 'config', 'systemd', 'schedflow.service');
/** Where Debian keeps systemd's units (/lib is a link to /usr/lib on merged-/usr systems). */
const SYSTEM_UNITS = ['/usr/lib/systemd/system', '/lib/systemd/system'].find((dir) => existsSync(dir));

let root: string;

function verify(unitText: string): { status: number | null; output: string } {
  const file = join(root, 'etc', 'systemd', 'system', 'schedflow.service');
  writeFileSync(file, unitText);
  const run = spawnSync('systemd-analyze', ['verify', `--root=${root}`, file], { encoding: 'utf8' });
  if (run.error) {
    throw new Error(`systemd-analyze: ${run.error.message} (install the systemd package: bash test/setup.sh)`);
  }
  return { status: run.status, output: `${run.stdout}${run.stderr}`.trim() };
}

beforeAll(() => {
  root = mkdtempSync(join(tmpdir(), 'schedflow-unit-'));
  mkdirSync(join(root, 'etc', 'systemd', 'system'), { recursive: true });
  mkdirSync(join(root, 'usr', 'bin'), { recursive: true });
  if (!SYSTEM_UNITS) throw new Error('no /usr/lib/systemd/system: install the systemd package (bash test/setup.sh)');
  cpSync(SYSTEM_UNITS, join(root, 'usr', 'lib', 'systemd', 'system'), { recursive: true });
  writeFileSync(join(root, 'usr', 'bin', 'schedflow'), '#!/bin/sh\n');
  chmodSync(join(root, 'usr', 'bin', 'schedflow'), 0o755);
});

afterAll(() => {
  rmSync(root, { recursive: true, force: true });
});

describe('config/systemd/schedflow.service', () => {
  const text = readFileSync(UNIT, 'utf8');

  it('passes systemd-analyze verify with nothing to say', () => {
    expect(verify(text)).toEqual({ status: 0, output: '' });
  });

  it('is verified for real: a misspelt key or value is reported', () => {
    const broken = text.replace('ProtectHome=read-only', 'ProtectHome=readonly').replace('UMask=', 'Umask=');
    const { output } = verify(broken);
    expect(output).toMatch(/protect home value.*readonly/i);
    expect(output).toMatch(/Unknown key.*Umask/);
  });

  it('runs the daemon on the folders systemd makes for it, as they must be', () => {
    const lines = new Set(text.split('\n').map((line) => line.trim()));
    expect(lines).toContain('ExecStart=schedflow start --config /etc/schedflow --data-dir /var/lib/schedflow');
    expect(lines).toContain('ConfigurationDirectory=schedflow');
    expect(lines).toContain('StateDirectory=schedflow');
    // The daemon refuses a data dir others can reach; systemd's default would be 0755.
    expect(lines).toContain('StateDirectoryMode=0700');
    expect(lines).toContain('User=schedflow');
    // A stop asked for (SIGTERM, exit 128 + 15) is no failure, and a configuration error (exit 2) is not restarted.
    expect(lines).toContain('SuccessExitStatus=143');
    expect(lines).toContain('RestartPreventExitStatus=2');
  });
});
