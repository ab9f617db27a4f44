import { closeSync, fstatSync, openSync, readSync, realpathSync } from 'node:fs';
import { sep } from 'node:path';

/**
 * The one bounded reader of a file's end (job output for summaries, the UI and the API): it
 * never reads more than `maxBytes`, however large the file, and says why when it cannot read.
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
  /** Folders never read from, through links too (schedflow's data and configuration). */
  protectedDirs?: readonly string[];
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
  | { kind: 'older'; sizeBytes: number; mtimeMs: number }
  | { kind: 'error'; code: string };

/** True when `path` is `dir` or inside it (both already resolved). */
function isInside(path: string, dir: string): boolean {
  return path === dir || path.startsWith(dir.endsWith(sep) ? dir : `${dir}${sep}`);
}

function realOrSelf(path: string): string {
  try {
    return realpathSync(path);
  } catch {
    return path;
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

/** Reads at most `maxBytes` from the end of a regular file, then its last `maxLines` lines. */
export function readFileTail(path: string, options: TailOptions): FileTail {
  const real = realOrSelf(path);
  if ((options.protectedDirs ?? []).some((dir) => isInside(real, realOrSelf(dir)))) return { kind: 'protected' };
  let fd: number;
  try {
    fd = openSync(real, 'r');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code ?? (error as Error).message;
    if (code === 'ENOENT' || code === 'ENOTDIR') return { kind: 'missing' };
    if (code === 'EACCES' || code === 'EPERM') return { kind: 'forbidden', code };
    return { kind: 'error', code };
  }
  try {
    const stat = fstatSync(fd);
    if (!stat.isFile()) return { kind: 'not-a-file' };
    if (options.notBeforeMs != null && stat.mtimeMs < options.notBeforeMs) {
      return { kind: 'older', sizeBytes: stat.size, mtimeMs: stat.mtimeMs };
    }
    const length = Math.max(0, Math.min(options.maxBytes, stat.size));
    const buffer = Buffer.alloc(length);
    let read = 0;
    // A file may shrink meanwhile (truncated by its writer): read what is there.
    while (read < length) {
      const n = readSync(fd, buffer, read, length - read, stat.size - length + read);
      if (n === 0) break;
      read += n;
    }
    const bytes = buffer.subarray(0, read);
    let text = bytes.toString('utf8');
    let truncated = length < stat.size;
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
    return { kind: 'ok', text, sizeBytes: stat.size, mtimeMs: stat.mtimeMs, truncated, binary: looksBinary(bytes) };
  } finally {
    closeSync(fd);
  }
}
