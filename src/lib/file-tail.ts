import {
  type BigIntStats,
  closeSync,
  constants,
  existsSync,
  fstatSync,
  lstatSync,
  openSync,
  readlinkSync,
  readSync,
  statSync,
} from 'node:fs';

/**
 * The one bounded reader of a file's end (job output for summaries, the UI and the API): it
 * never reads more than `maxBytes`, however large the file, and says why when it cannot read.
 *
 * The path comes from a job, and the job owns the folders along it: between the daemon's
 * checks and its read, the job can put a FIFO, a device or a link where its output was, or
 * swap a folder of the path for a link into schedflow's own. So nothing here is done by name
 * twice: the path is walked one component at a time from an open folder (Node has no
 * `openat`; `/proc/self/fd/<fd>/<name>` is one, the kernel following only that magic link),
 * no link a job could have made is followed anywhere along it (only root's, walked again), every folder opened is compared with the protected
 * ones by device and inode, the file is opened only when `lstat` says it is a regular file and
 * without blocking, and what was opened is checked again on its descriptor.
 */

export interface TailOptions {
  /** Bytes read from the end at most. */
  maxBytes: number;
  /** Keep only the last this many lines of what was read; absent: all of it. */
  maxLines?: number;
  /**
   * A file last changed before this (Unix ms) is left out: it is not the output of a job that
   * started after it (a job id reused by another scheduler or an older state).
   */
  notBeforeMs?: number | null;
  /** Folders never read from, whatever path leads into them (schedflow's data and configuration). */
  protectedDirs?: readonly string[];
  /**
   * The uid the file must belong to: the job's user on this host. Null where the daemon cannot
   * tell who that is (a scheduler user with no account here): then, read by root, only root's
   * own files are refused. Absent: not asked (a file that is not a job's).
   */
  ownerUid?: number | null;
}

export type FileTail =
  | {
      kind: 'ok';
      /** The last lines as UTF-8 text (a line cut by the byte bound is dropped). */
      text: string;
      sizeBytes: number;
      mtimeMs: number;
      /** True when the file holds more than `text`: earlier lines, or more than `maxBytes`. */
      truncated: boolean;
      /** The raw bytes read looked binary (a NUL, or many control bytes). */
      binary: boolean;
    }
  | { kind: 'missing' }
  | { kind: 'forbidden'; code: string }
  | { kind: 'protected' }
  | { kind: 'not-a-file' }
  /** A symbolic link somewhere along the path: never followed, whoever made it. */
  | { kind: 'link' }
  /** Not an absolute path of plain names (relative, or with `.` or `..`). */
  | { kind: 'unsafe-path' }
  /** The file belongs to another user than the job's. */
  | { kind: 'not-owner'; uid: number }
  /** A file of the daemon's own user with more than one name: maybe a hard link to one of its files. */
  | { kind: 'hard-link' }
  | { kind: 'older'; sizeBytes: number; mtimeMs: number }
  | { kind: 'error'; code: string };

type Refusal = Exclude<FileTail, { kind: 'ok' } | { kind: 'older' }>;

const { O_RDONLY, O_DIRECTORY, O_NOFOLLOW, O_NONBLOCK, O_NOCTTY } = constants;
/**
 * Linux's O_PATH (Node does not name it; the same value on every architecture Node runs on
 * but alpha, sparc and parisc): a folder opened only to look up names in it, which needs the
 * right to pass through it, not to list it. Home and project folders of clusters are often
 * 0711 or 0710, which the daemon's user (not root) may pass through but not read.
 */
const O_PATH = 0o10000000;
/** A folder along the path: refused when it is a link (ENOTDIR for a link with O_DIRECTORY). */
const DIR_FLAGS = O_PATH | O_DIRECTORY | O_NOFOLLOW;
/** The file: O_NONBLOCK so that a FIFO or device put there after the `lstat` does not hold the open. */
const FILE_FLAGS = O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY;

/** The daemon's own uid; null where the platform has none. */
const DAEMON_UID = process.getuid?.() ?? null;

let procFd: boolean | undefined;
/** Whether `/proc/self/fd` is there (Linux with /proc mounted): without it no open here is safe. */
function hasProcFd(): boolean {
  procFd ??= existsSync('/proc/self/fd');
  return procFd;
}

/** `name` inside the folder open as `dirFd`, however that folder was reached. */
function inside(dirFd: number, name: string): string {
  return `/proc/self/fd/${dirFd}/${name}`;
}

function identity(stat: BigIntStats): string {
  return `${stat.dev}:${stat.ino}`;
}

/** The protected folders by device and inode, so a path that reaches one by another name is caught. */
function identitiesOf(dirs: readonly string[]): Set<string> {
  const ids = new Set<string>();
  for (const dir of dirs) {
    try {
      const stat = statSync(dir, { bigint: true });
      if (stat.isDirectory()) ids.add(identity(stat));
    } catch {
      // A folder that does not exist holds nothing to protect.
    }
  }
  return ids;
}

function codeOf(error: unknown): string {
  return (error as NodeJS.ErrnoException).code ?? (error as Error).message;
}

/** Why opening `name` in `dirFd` failed, as an outcome; a link is told apart from a missing folder. */
function refusalOf(error: unknown, dirFd: number, name: string): Refusal {
  const code = codeOf(error);
  if (code === 'ELOOP') return { kind: 'link' };
  if (code === 'ENOTDIR') {
    try {
      if (lstatSync(inside(dirFd, name)).isSymbolicLink()) return { kind: 'link' };
    } catch {
      // Gone meanwhile: missing, as below.
    }
    return { kind: 'missing' };
  }
  if (code === 'ENOENT') return { kind: 'missing' };
  if (code === 'EACCES' || code === 'EPERM') return { kind: 'forbidden', code };
  return { kind: 'error', code };
}

/** Links an admin made (owned by root) followed along one path at the most, as the kernel's 40 for any. */
const MAX_ROOT_LINKS = 8;

/** Plain names of an absolute path; null when it is relative or has `.` or `..`. */
function namesOf(path: string): string[] | null {
  if (!path.startsWith('/')) return null;
  const names = path.split('/').filter((name) => name !== '');
  // `..` would climb out of a folder already checked; `.` has no business in a reported path.
  return names.some((name) => name === '.' || name === '..') ? null : names;
}

/**
 * A link along the path that may be followed: one owned by root with an absolute target of
 * plain names (a site's `/home -> /gpfs/home`). A job never runs as root here (the simulator
 * drops to a user; Slurm runs jobs as their submitter), so it cannot make one; any other link
 * is the job's, and refused. The target is walked again from `/`, with the same checks.
 */
function rootLinkTarget(dirFd: number, name: string, stat: BigIntStats): string[] | null {
  if (stat.uid !== 0n) return null;
  try {
    const target = readlinkSync(inside(dirFd, name));
    // Still that link after it was read (not swapped for another in between).
    const again = lstatSync(inside(dirFd, name), { bigint: true });
    return again.isSymbolicLink() && again.uid === 0n && identity(again) === identity(stat) ? namesOf(target) : null;
  } catch {
    return null;
  }
}

/**
 * Opens a regular file by an absolute path without following a link a job could have made
 * anywhere along it and without blocking; the descriptor is the caller's to close.
 */
function openRegularFile(
  path: string,
  protectedDirs: readonly string[],
): { kind: 'opened'; fd: number; stat: BigIntStats } | Refusal {
  const names = namesOf(path);
  if (names === null) return { kind: 'unsafe-path' };
  if (names.length === 0) return { kind: 'not-a-file' };
  if (!hasProcFd()) return { kind: 'error', code: 'no /proc/self/fd on this host (Linux only)' };
  const guarded = identitiesOf(protectedDirs);
  let dir: number;
  try {
    dir = openSync('/', DIR_FLAGS);
  } catch (error) {
    return { kind: 'error', code: codeOf(error) };
  }
  let links = 0;
  try {
    if (guarded.has(identity(fstatSync(dir, { bigint: true })))) return { kind: 'protected' };
    while (names.length > 0) {
      const name = names.shift() as string;
      // Looked at before it is opened: a FIFO or a device is never opened at all.
      let seen: BigIntStats;
      try {
        seen = lstatSync(inside(dir, name), { bigint: true });
      } catch (error) {
        return refusalOf(error, dir, name);
      }
      if (seen.isSymbolicLink()) {
        const target = links < MAX_ROOT_LINKS ? rootLinkTarget(dir, name, seen) : null;
        if (target === null) return { kind: 'link' };
        links++;
        names.unshift(...target);
        closeSync(dir);
        dir = openSync('/', DIR_FLAGS);
        continue;
      }
      if (names.length > 0) {
        let next: number;
        try {
          next = openSync(inside(dir, name), DIR_FLAGS);
        } catch (error) {
          return refusalOf(error, dir, name);
        }
        closeSync(dir);
        dir = next;
        if (guarded.has(identity(fstatSync(dir, { bigint: true })))) return { kind: 'protected' };
        continue;
      }
      if (!seen.isFile()) return { kind: 'not-a-file' };
      let fd: number;
      try {
        fd = openSync(inside(dir, name), FILE_FLAGS);
      } catch (error) {
        return refusalOf(error, dir, name);
      }
      const stat = fstatSync(fd, { bigint: true });
      // Replaced between the lstat and the open: not the file that was looked at.
      if (!stat.isFile() || identity(stat) !== identity(seen)) {
        closeSync(fd);
        return stat.isFile() ? { kind: 'error', code: 'replaced while being opened' } : { kind: 'not-a-file' };
      }
      return { kind: 'opened', fd, stat };
    }
    return { kind: 'not-a-file' };
  } finally {
    closeSync(dir);
  }
}

/** More than this share of control bytes (or any NUL) makes bytes binary. */
const BINARY_SHARE = 0.1;

function looksBinary(bytes: Buffer): boolean {
  if (bytes.includes(0)) return true;
  let control = 0;
  for (const b of bytes) if (b < 0x09 || (b > 0x0d && b < 0x20)) control++;
  return bytes.length > 0 && control / bytes.length > BINARY_SHARE;
}

/**
 * Reads at most `maxBytes` from the end of a regular file, then its last `maxLines` lines.
 * Synchronous: nothing here waits on a writer (see the top of the file); only a file system
 * that does not answer at all (a hung NFS or FUSE mount) would hold it.
 */
export function readFileTail(path: string, options: TailOptions): FileTail {
  const opened = openRegularFile(path, options.protectedDirs ?? []);
  if (opened.kind !== 'opened') return opened;
  const { fd } = opened;
  try {
    const uid = Number(opened.stat.uid);
    if (options.ownerUid != null && uid !== options.ownerUid) return { kind: 'not-owner', uid };
    // The job's user unknown (no account of that name here, no record yet), read by root: root's
    // own files (its logs, its keys) are never a job's output, unless the job is known to be root's.
    if (options.ownerUid === null && DAEMON_UID === 0 && uid === 0) return { kind: 'not-owner', uid };
    // A job cannot make a hard link to a file it may not read (fs.protected_hardlinks), but
    // where that is off, or where jobs run as the daemon's user, a second name of one of the
    // daemon's files (its history, its keys) is one inside schedflow's folders.
    if (DAEMON_UID !== null && uid === DAEMON_UID && opened.stat.nlink > 1n) return { kind: 'hard-link' };
    const size = Number(opened.stat.size);
    const mtimeMs = Number(opened.stat.mtimeNs) / 1e6;
    if (options.notBeforeMs != null && mtimeMs < options.notBeforeMs) {
      return { kind: 'older', sizeBytes: size, mtimeMs };
    }
    const length = Math.max(0, Math.min(options.maxBytes, size));
    const buffer = Buffer.alloc(length);
    let read = 0;
    // A file may shrink meanwhile (truncated by its writer): read what is there.
    while (read < length) {
      const n = readSync(fd, buffer, read, length - read, size - length + read);
      if (n === 0) break;
      read += n;
    }
    const bytes = buffer.subarray(0, read);
    let text = bytes.toString('utf8');
    let truncated = length < size;
    // Cut inside the file: the first line is partial (and maybe half a character); drop it.
    if (truncated) {
      const newline = text.indexOf('\n');
      text = newline >= 0 ? text.slice(newline + 1) : text;
    }
    if (options.maxLines !== undefined) {
      const lines = text.endsWith('\n') ? text.slice(0, -1).split('\n') : text.split('\n');
      if (lines.length > options.maxLines) {
        truncated = true;
        text = lines.slice(lines.length - options.maxLines).join('\n') + (text.endsWith('\n') ? '\n' : '');
        if (options.maxLines === 0) text = '';
      }
    }
    return { kind: 'ok', text, sizeBytes: size, mtimeMs, truncated, binary: looksBinary(bytes) };
  } finally {
    closeSync(fd);
  }
}
