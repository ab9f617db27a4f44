import { type ChildProcess, execFile, spawn } from 'node:child_process';
import {
  chmodSync,
  chownSync,
  closeSync,
  constants,
  lchownSync,
  linkSync,
  mkdirSync,
  mkdtempSync,
  openSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { readFileTail } from '../../../src/lib/file-tail.js';
import { hostUidOf, jobUidOf, setUnmappedJobUid } from '../../../src/lib/host-users.js';
import { REPO, TSX } from '../../helpers/cli-process.js';

/**
 * Issue 30, points 1 and 2: what a job can put where its output was, read as the API, the UI,
 * the CLI and the summarizer read it (src/lib/file-tail.ts). The job's side is played here by
 * the test, on disk; test/integration/daemon-process/output-fifo.test.ts has a job do it.
 */

const isRoot = process.getuid?.() === 0;
/** An unprivileged host user for the job's side (Debian's `nobody`). */
const NOBODY_UID = 65534;

let root: string;
const children: ChildProcess[] = [];

/**
 * A link as a job makes it: its user's, not root's (as root, the test hands it to `nobody`).
 * Root's links are an admin's (`/home -> /gpfs/home`), followed.
 */
function jobLink(target: string, path: string): void {
  symlinkSync(target, path);
  if (isRoot) lchownSync(path, NOBODY_UID, NOBODY_UID);
}

function newRoot(): string {
  root = mkdtempSync(join(tmpdir(), 'schedflow-output-reader-'));
  return root;
}

afterEach(async () => {
  await Promise.all(
    children.splice(0).map(
      (child) =>
        new Promise<void>((resolve) => {
          if (child.exitCode !== null || child.signalCode !== null) return resolve();
          child.once('exit', () => resolve());
          child.kill('SIGKILL');
        }),
    ),
  );
  if (root) rmSync(root, { recursive: true, force: true });
});

/** `readFileTail(path)` in a process of its own, so that a reader that blocks is killed, not this file's worker. */
function readInChild(path: string, timeoutMs: number): Promise<{ answer: unknown; killed: boolean }> {
  const code = `import { readFileTail } from ${JSON.stringify(join(REPO, 'src/lib/file-tail.ts'))};
process.stdout.write(JSON.stringify(readFileTail(process.argv[1], { maxBytes: 100 })));`;
  return new Promise((resolve, reject) => {
    const child = execFile(
      process.execPath,
      ['--import', TSX, '--input-type=module', '-e', code, path],
      { timeout: timeoutMs, killSignal: 'SIGKILL' },
      (error, stdout) => {
        if (error && !error.killed) return reject(error);
        resolve({ answer: stdout ? JSON.parse(stdout) : undefined, killed: error?.killed ?? false });
      },
    );
    children.push(child);
  });
}

/** True when a FIFO has a reader: opening it to write without blocking fails (ENXIO) when none. */
function fifoHasReader(path: string): boolean {
  try {
    const fd = openSync(path, constants.O_WRONLY | constants.O_NONBLOCK);
    closeSync(fd);
    return true;
  } catch {
    return false;
  }
}

describe('a FIFO or a device where the output was', () => {
  it('is never opened: the reader answers at once, and the FIFO never had a reader', async () => {
    const dir = newRoot();
    const fifo = join(dir, 'slurm-1.out');
    await new Promise<void>((resolve, reject) =>
      execFile('mkfifo', [fifo], (error) => (error ? reject(error) : resolve())),
    );
    // Seconds for a process to start on a loaded machine; the reader itself takes microseconds.
    const { answer, killed } = await readInChild(fifo, 15_000);
    expect(killed, 'the reader blocked on the FIFO until it was killed').toBe(false);
    expect(answer).toEqual({ kind: 'not-a-file' });
    // In this process too: it returns, and leaves no reader on the FIFO.
    expect(readFileTail(fifo, { maxBytes: 100 })).toEqual({ kind: 'not-a-file' });
    expect(fifoHasReader(fifo)).toBe(false);
  }, 30_000);

  it.skipIf(!isRoot)('is never opened when a device (opening one with no driver fails: it was opened)', async () => {
    const dir = newRoot();
    const device = join(dir, 'slurm-2.out');
    // Major 240 is for local use: no driver here, so an open of it fails with ENXIO.
    await new Promise<void>((resolve, reject) =>
      execFile('mknod', [device, 'c', '240', '0'], (error) => (error ? reject(error) : resolve())),
    );
    expect(readFileTail(device, { maxBytes: 100 })).toEqual({ kind: 'not-a-file' });
  });
});

describe('a link the job planted', () => {
  function secretFile(dir: string): string {
    const secret = join(dir, 'root-only');
    writeFileSync(secret, 'ROOT ONLY SECRET\n', { mode: 0o600 });
    return secret;
  }

  it('is not followed as the file itself', () => {
    const dir = newRoot();
    const out = join(dir, 'job', 'slurm-3.out');
    mkdirSync(join(dir, 'job'));
    jobLink(secretFile(dir), out);
    expect(readFileTail(out, { maxBytes: 100 })).toEqual({ kind: 'link' });
  });

  it('is not followed as a folder along the path', () => {
    const dir = newRoot();
    const secrets = join(dir, 'secrets');
    mkdirSync(secrets);
    writeFileSync(join(secrets, 'slurm-4.out'), 'ROOT ONLY SECRET\n', { mode: 0o600 });
    jobLink(secrets, join(dir, 'job'));
    expect(readFileTail(join(dir, 'job', 'slurm-4.out'), { maxBytes: 100 })).toEqual({ kind: 'link' });
    // `..` would climb out of a folder checked already; a relative path has nothing to start from.
    expect(readFileTail(`${dir}/job/../secrets/slurm-4.out`, { maxBytes: 100 })).toEqual({
      kind: 'unsafe-path',
    });
    expect(readFileTail('secrets/slurm-4.out', { maxBytes: 100 })).toEqual({ kind: 'unsafe-path' });
  });

  it.skipIf(!isRoot)("is followed when root's (an admin's), and its target is checked as any path", () => {
    const dir = newRoot();
    const gpfs = join(dir, 'gpfs', 'home');
    mkdirSync(join(gpfs, 'alice'), { recursive: true });
    writeFileSync(join(gpfs, 'alice', 'slurm-7.out'), 'on the parallel file system\n');
    symlinkSync(gpfs, join(dir, 'home'));
    expect(readFileTail(join(dir, 'home', 'alice', 'slurm-7.out'), { maxBytes: 100 })).toMatchObject({
      kind: 'ok',
      text: 'on the parallel file system\n',
    });
    // A relative target (or one with `..`) is not walked; nor is a root link into schedflow's folders read.
    symlinkSync('gpfs/home', join(dir, 'home2'));
    expect(readFileTail(join(dir, 'home2', 'alice', 'slurm-7.out'), { maxBytes: 100 })).toEqual({ kind: 'link' });
    const dataDir = join(dir, 'data');
    mkdirSync(dataDir);
    writeFileSync(join(dataDir, 'history.sqlite-wal'), 'WAL\n');
    symlinkSync(dataDir, join(dir, 'into-data'));
    expect(
      readFileTail(join(dir, 'into-data', 'history.sqlite-wal'), { maxBytes: 100, protectedDirs: [dataDir] }),
    ).toEqual({ kind: 'protected' });
    // Links that lead to each other end, as the kernel's do.
    symlinkSync(join(dir, 'loop-b'), join(dir, 'loop-a'));
    symlinkSync(join(dir, 'loop-a'), join(dir, 'loop-b'));
    expect(readFileTail(join(dir, 'loop-a', 'x'), { maxBytes: 100 })).toEqual({ kind: 'link' });
  });

  it("is not read when a hard link to one of the daemon's own files", () => {
    const dir = newRoot();
    const dataDir = join(dir, 'data');
    mkdirSync(join(dir, 'job'));
    mkdirSync(dataDir);
    writeFileSync(join(dataDir, 'webhook-secret'), 'the-webhook-secret\n', { mode: 0o600 });
    linkSync(join(dataDir, 'webhook-secret'), join(dir, 'job', 'slurm-5.out'));
    const tail = readFileTail(join(dir, 'job', 'slurm-5.out'), { maxBytes: 100, protectedDirs: [dataDir] });
    expect(tail).toEqual({ kind: 'hard-link' });
  });
});

describe("a file of another user than the job's", () => {
  it.skipIf(!isRoot)("is not read when the job's user is known; the job's own file is", async () => {
    const dir = newRoot();
    const job = join(dir, 'job');
    mkdirSync(job);
    chmodSync(dir, 0o755);
    // A path the spec names that the job did not write: a file of root's that changes all the time.
    const log = join(job, 'auth.log');
    writeFileSync(log, 'sshd: accepted password for root\n', { mode: 0o640 });
    const uid = await hostUidOf('nobody');
    expect(uid).toBe(NOBODY_UID);
    expect(readFileTail(log, { maxBytes: 100, ownerUid: uid })).toEqual({ kind: 'not-owner', uid: 0 });
    const own = join(job, 'slurm-6.out');
    writeFileSync(own, 'hello from the job\n');
    chownSync(own, NOBODY_UID, NOBODY_UID);
    expect(readFileTail(own, { maxBytes: 100, ownerUid: uid })).toMatchObject({
      kind: 'ok',
      text: 'hello from the job\n',
    });
    // A user with no account on this host (a simulator's token user): the owner cannot be told.
    // Read by root, root's own files are still refused then; another user's file is read.
    expect(await hostUidOf('no-such-user-here')).toBeNull();
    expect(readFileTail(log, { maxBytes: 100, ownerUid: null })).toEqual({ kind: 'not-owner', uid: 0 });
    expect(readFileTail(own, { maxBytes: 100, ownerUid: null })).toMatchObject({ kind: 'ok' });
    // The embedded simulator runs such users' jobs as its job user: that uid is theirs then.
    setUnmappedJobUid(NOBODY_UID);
    try {
      expect(await jobUidOf('no-such-user-here')).toBe(NOBODY_UID);
      expect(await jobUidOf('nobody')).toBe(NOBODY_UID);
    } finally {
      setUnmappedJobUid(null);
    }
    expect(await jobUidOf('no-such-user-here')).toBeNull();
    expect(await hostUidOf('-x')).toBeNull();
  });
});

describe('a folder of the path swapped for a link into the data dir while the reader reads', () => {
  it("never yields the data dir's file, over 5,000 reads racing the swaps", async () => {
    const dir = newRoot();
    const dataDir = join(dir, 'data');
    mkdirSync(dataDir);
    writeFileSync(join(dataDir, 'out'), 'HISTORY WAL BYTES\n');
    const real = join(dir, 'real');
    mkdirSync(real);
    writeFileSync(join(real, 'out'), 'job output\n');
    jobLink(dataDir, join(dir, 'link'));
    const swap = join(dir, 'swap');
    // The job's side: `swap` is the real folder, then a link to the data dir, then the folder…
    const swapper = spawn(
      process.execPath,
      [
        '-e',
        `const { renameSync } = require('node:fs');
const [real, link, swap] = process.argv.slice(1);
for (let i = 0; i < 10_000_000; i++) {
  renameSync(real, swap); if (i === 0) process.stdout.write('swapping\\n'); renameSync(swap, real);
  renameSync(link, swap); renameSync(swap, link);
}`,
        real,
        join(dir, 'link'),
        swap,
      ],
      { stdio: ['ignore', 'pipe', 'inherit'] },
    );
    children.push(swapper);
    await new Promise<void>((resolve, reject) => {
      swapper.stdout?.once('data', () => resolve());
      swapper.once('exit', (code) => reject(new Error(`the swapper ended (${code}) before swapping`)));
    });
    const seen = new Map<string, number>();
    let leaked = 0;
    for (let i = 0; i < 5000; i++) {
      const tail = readFileTail(join(swap, 'out'), { maxBytes: 1 << 20, protectedDirs: [dataDir] });
      const key = tail.kind === 'ok' ? `ok: ${tail.text.trim()}` : tail.kind;
      seen.set(key, (seen.get(key) ?? 0) + 1);
      if (tail.kind === 'ok' && tail.text.includes('HISTORY')) leaked++;
    }
    expect(leaked, `outcomes: ${JSON.stringify(Object.fromEntries(seen))}`).toBe(0);
    // The race was run: the real folder was read through the swapped name at times.
    expect(seen.get('ok: job output'), JSON.stringify(Object.fromEntries(seen))).toBeGreaterThan(0);
  }, 60_000);
});
