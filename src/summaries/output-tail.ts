import { closeSync, fstatSync, openSync, readSync, realpathSync } from 'node:fs';
import { isAbsolute, resolve, sep } from 'node:path';

/** The end of one output file as a prompt shows it, or why it is not there. */
export interface OutputTail {
  /** `output` (stdout and stderr in one file), `stdout` or `stderr`. */
  label: 'output' | 'stdout' | 'stderr';
  path: string;
  /** The last bytes as text; null when the file could not be used. */
  text: string | null;
  sizeBytes: number | null;
  /** Why there is no text (missing, unreadable, older than the job). */
  note: string | null;
}

/** Expands Slurm's filename pattern (`%j`, `%x`, `%u`, `%N`, `%%`); null when it uses one schedflow cannot know (`%A`, `%a`, ...). */
export function expandOutputPattern(
  pattern: string,
  job: { jobId: number; name: string; user: string | null; node: string | null },
): string | null {
  let unknown = false;
  const out = pattern.replace(/%(%|[A-Za-z])/g, (_match, c: string) => {
    switch (c) {
      case '%':
        return '%';
      case 'j':
        return String(job.jobId);
      case 'x':
        return job.name;
      case 'u':
        if (job.user) return job.user;
        unknown = true;
        return '';
      case 'N':
        if (job.node) return job.node;
        unknown = true;
        return '';
      default:
        unknown = true;
        return '';
    }
  });
  return unknown ? null : out;
}

/** Control characters other than newline and tab, and terminal escape sequences, which mean nothing in a prompt. */
function printable(text: string): string {
  return (
    text
      // biome-ignore lint/suspicious/noControlCharactersInRegex: removing terminal escapes is the point
      .replace(/\u001b\[[0-9;?]*[ -/]*[@-~]/g, '')
      // biome-ignore lint/suspicious/noControlCharactersInRegex: as above
      .replace(/[\u0000-\u0008\u000b-\u001f\u007f]/g, '')
  );
}

/** True when `path` is `dir` or inside it (both already resolved). */
function isInside(path: string, dir: string): boolean {
  return path === dir || path.startsWith(dir.endsWith(sep) ? dir : `${dir}${sep}`);
}

/** More than this share of control bytes (or any NUL) makes a tail binary: not output worth a prompt. */
const BINARY_SHARE = 0.1;

function looksBinary(bytes: Buffer): boolean {
  if (bytes.includes(0)) return true;
  let control = 0;
  for (const b of bytes) if (b < 0x09 || (b > 0x0d && b < 0x20)) control++;
  return bytes.length > 0 && control / bytes.length > BINARY_SHARE;
}

function realOrSelf(path: string): string {
  try {
    return realpathSync(path);
  } catch {
    return path;
  }
}

/**
 * Reads at most `maxBytes` from the end of a regular file. A file changed
 * before `notBeforeMs` is not this job's (a job id reused by another
 * scheduler or an older state), and is left out. The output paths come from
 * job specs, which anyone allowed to submit writes: a path that leads (through
 * links too) into `protectedDirs` (schedflow's data and configuration, with its
 * keys and history) is never read, nor is a binary file.
 */
export function readTail(
  path: string,
  label: OutputTail['label'],
  maxBytes: number,
  notBeforeMs: number | null,
  protectedDirs: readonly string[] = [],
): OutputTail {
  const real = realOrSelf(path);
  if (protectedDirs.some((dir) => isInside(real, realOrSelf(dir)))) {
    return { label, path, text: null, sizeBytes: null, note: "inside schedflow's own folders: not read" };
  }
  let fd: number;
  try {
    fd = openSync(real, 'r');
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    const note =
      code === 'ENOENT'
        ? 'not found from the machine schedflow runs on (not on a shared file system, or removed)'
        : code === 'EACCES'
          ? 'schedflow may not read it'
          : `cannot be read (${code ?? (error as Error).message})`;
    return { label, path, text: null, sizeBytes: null, note };
  }
  try {
    const stat = fstatSync(fd);
    if (!stat.isFile()) return { label, path, text: null, sizeBytes: null, note: 'not a regular file' };
    if (notBeforeMs !== null && stat.mtimeMs < notBeforeMs) {
      return {
        label,
        path,
        text: null,
        sizeBytes: stat.size,
        note: 'last written before the job started: not its output',
      };
    }
    const length = Math.min(maxBytes, stat.size);
    const buffer = Buffer.alloc(length);
    const read = length > 0 ? readSync(fd, buffer, 0, length, stat.size - length) : 0;
    if (looksBinary(buffer.subarray(0, read))) {
      return { label, path, text: null, sizeBytes: stat.size, note: 'binary, not text output: left out' };
    }
    let text = buffer.subarray(0, read).toString('utf8');
    // Cut inside the file: the first line is partial (and maybe half a character); drop it.
    if (length < stat.size) {
      const newline = text.indexOf('\n');
      text = newline >= 0 ? text.slice(newline + 1) : text;
    }
    return { label, path, text: printable(text), sizeBytes: stat.size, note: null };
  } finally {
    closeSync(fd);
  }
}

/**
 * The tails of a job's output files, from its spec (`standard_output`,
 * `standard_error`, default `slurm-%j.out`) resolved against its working
 * directory (/tmp when it names none, where the simulator and slurmstepd fall back to).
 */
export function outputTails(
  spec: { standard_output?: unknown; standard_error?: unknown; current_working_directory?: unknown },
  job: { jobId: number; name: string; user: string | null; node: string | null },
  maxBytes: number,
  notBeforeMs: number | null,
  protectedDirs: readonly string[] = [],
): OutputTail[] {
  const cwd = typeof spec.current_working_directory === 'string' ? spec.current_working_directory : '/tmp';
  const resolvePath = (pattern: string): string | null => {
    const expanded = expandOutputPattern(pattern, job);
    if (expanded === null) return null;
    return isAbsolute(expanded) ? expanded : resolve(cwd, expanded);
  };
  const stdoutPattern = typeof spec.standard_output === 'string' ? spec.standard_output : 'slurm-%j.out';
  const stderrPattern = typeof spec.standard_error === 'string' ? spec.standard_error : null;
  const stdout = resolvePath(stdoutPattern);
  const stderr = stderrPattern ? resolvePath(stderrPattern) : stdout;
  const tails: OutputTail[] = [];
  if (stdout === null) {
    tails.push({
      label: 'stdout',
      path: stdoutPattern,
      text: null,
      sizeBytes: null,
      note: 'its name pattern uses fields schedflow does not know',
    });
  } else if (stderr === stdout) {
    tails.push(readTail(stdout, 'output', maxBytes, notBeforeMs, protectedDirs));
    return tails;
  } else {
    tails.push(readTail(stdout, 'stdout', maxBytes, notBeforeMs, protectedDirs));
  }
  if (stderr === null) {
    tails.push({
      label: 'stderr',
      path: stderrPattern ?? '',
      text: null,
      sizeBytes: null,
      note: 'its name pattern uses fields schedflow does not know',
    });
  } else {
    tails.push(readTail(stderr, 'stderr', maxBytes, notBeforeMs, protectedDirs));
  }
  return tails;
}
