import { statSync } from 'node:fs';
import { dirname } from 'node:path';
import type { JobRequestRow, StepOutputs } from '../db/schema.js';
import { assertNever } from '../lib/assert-never.js';
import { readFileTail } from '../lib/file-tail.js';
import { outputsFileOf } from '../requests/outputs-file.js';
import type { JobSpec } from '../sched/job-spec.js';

/**
 * A pipeline step's outputs (issue 36): `name=value` lines its job wrote to `$SCHEDFLOW_OUTPUTS`,
 * read by the daemon once the step completed. The file is the job's, so it is hostile input: read
 * as job output is (src/lib/file-tail.ts: no link followed anywhere along the path, a regular file
 * of the job's user, nothing in schedflow's folders), bounded, and every line checked.
 */

/** Bytes an outputs file may hold; a larger one is refused whole, not cut. */
export const MAX_OUTPUTS_FILE_BYTES = 64 * 1024;
/** Characters one value may have. */
export const MAX_OUTPUT_VALUE_CHARS = 4096;
/** An output's name: as a shell variable's. */
export const OUTPUT_NAME = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;

export type ParsedOutputs = { ok: true; values: Record<string, string> } | { ok: false; error: string };

/**
 * The values of an outputs file's text. Blank lines and lines starting with `#` are skipped; a
 * name written twice keeps its last value (a script may append as it goes). Anything else that
 * is not `name=value` is an error naming the line: a half-written file is not read as if whole.
 */
export function parseOutputs(text: string): ParsedOutputs {
  const values: Record<string, string> = Object.create(null);
  const lines = text.split('\n');
  // The file's last newline ends its last line, it does not start an empty one.
  if (lines.at(-1) === '') lines.pop();
  for (const [i, raw] of lines.entries()) {
    const line = raw.endsWith('\r') ? raw.slice(0, -1) : raw;
    if (line.trim() === '' || line.trimStart().startsWith('#')) continue;
    const eq = line.indexOf('=');
    const name = eq < 0 ? line : line.slice(0, eq);
    if (eq < 0 || !OUTPUT_NAME.test(name)) {
      return {
        ok: false,
        error: `line ${i + 1}: not name=value with a name of letters, digits and _ (not a digit first, up to 64)`,
      };
    }
    const value = line.slice(eq + 1);
    if (value.length > MAX_OUTPUT_VALUE_CHARS) {
      return {
        ok: false,
        error: `line ${i + 1}: the value of ${name} is longer than ${MAX_OUTPUT_VALUE_CHARS} characters`,
      };
    }
    // biome-ignore lint/suspicious/noControlCharactersInRegex: control characters are what is refused
    if (/[\u0000-\u0008\u000b-\u001f\u007f]/.test(value)) {
      return { ok: false, error: `line ${i + 1}: the value of ${name} holds control characters` };
    }
    values[name] = value;
  }
  return { ok: true, values: { ...values } };
}

export interface ReadOutputsOptions {
  /** Folders never read from (schedflow's data and configuration). */
  protectedDirs: readonly string[];
  /** The uid the file must belong to (the job's user on this host); null: unknown (src/lib/host-users.ts). */
  ownerUid: number | null;
  /**
   * A file last changed before this (Unix ms) was not written by this request's job: it is read as
   * none written. A declared file (`outputs: { file }`) has one path for every run and retry, so
   * without it a step that writes nothing would hand on the values an earlier run wrote.
   */
  notBeforeMs?: number | null;
}

/**
 * Reads the outputs of a completed step request. A step that wrote no file has no outputs (not an
 * error: most steps write none); a file the daemon cannot see, or cannot trust, is recorded with
 * why, and a step that uses one of its values fails with it (src/pipelines/deferred-steps.ts).
 */
export function readStepOutputs(
  row: Pick<JobRequestRow, 'id'> & { spec: unknown },
  options: ReadOutputsOptions,
): StepOutputs {
  const path = outputsFileOf(row.id, row.spec as JobSpec);
  if (path === null) return { path: null, values: {}, error: null };
  const failed = (error: string): StepOutputs => ({ path, values: {}, error });
  const tail = readFileTail(path, {
    // One byte over the bound tells a file over it from one exactly at it.
    maxBytes: MAX_OUTPUTS_FILE_BYTES + 1,
    protectedDirs: options.protectedDirs,
    ownerUid: options.ownerUid,
    notBeforeMs: options.notBeforeMs ?? null,
  });
  switch (tail.kind) {
    case 'ok': {
      if (tail.truncated || tail.sizeBytes > MAX_OUTPUTS_FILE_BYTES) {
        return failed(
          `${path} holds ${tail.sizeBytes} bytes, more than the ${MAX_OUTPUTS_FILE_BYTES} an outputs file may`,
        );
      }
      if (tail.binary) return failed(`${path} is not text`);
      const parsed = parseOutputs(tail.text);
      return parsed.ok ? { path, values: parsed.values, error: null } : failed(`${path}: ${parsed.error}`);
    }
    case 'missing':
      // No file in a working directory the daemon sees: the step wrote none. No working
      // directory: the daemon does not see it at all.
      return isVisibleDir((row.spec as JobSpec).current_working_directory ?? dirname(path))
        ? { path, values: {}, error: null }
        : failed(notVisible(path));
    case 'forbidden':
      return failed(`${path} cannot be read by the daemon (${tail.code}): ${notVisibleFix}`);
    case 'protected':
      return failed(`${path} is inside schedflow's own data or configuration folder: not read`);
    case 'not-a-file':
      return failed(`${path} is not a regular file: not read`);
    case 'link':
      return failed(`${path} is or passes through a symbolic link: not followed`);
    case 'unsafe-path':
      return failed(`${path} is not an absolute path of plain names: not read`);
    case 'not-owner':
      return failed(`${path} belongs to uid ${tail.uid}, not to the job's user: not read`);
    case 'hard-link':
      return failed(`${path} is a second name of a file of the daemon's user: not read`);
    case 'older':
      // Left by an earlier run or attempt (a declared file keeps its path): this job wrote none.
      return { path, values: {}, error: null };
    case 'error':
      return failed(`${path} could not be read (${tail.code})`);
    default:
      return assertNever(tail);
  }
}

const notVisibleFix =
  "the daemon reads a step's outputs from its working directory: put current_working_directory on a file system the daemon's host mounts too (a shared file system), where the daemon's user may read";

function notVisible(path: string): string {
  return `the working directory of ${path} is not visible to the daemon on this host: ${notVisibleFix}`;
}

function isVisibleDir(path: string): boolean {
  try {
    return statSync(path).isDirectory();
  } catch {
    return false;
  }
}
