import { assertNever } from '../lib/assert-never.js';
import { readFileTail } from '../lib/file-tail.js';
import { expandOutputPattern as expandPattern, type OutputSpec, outputPathsOf } from '../sched/output-paths.js';

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

/** Expands Slurm's filename pattern for a job that is not an array task; null when it uses a field not known (`%N` before the job ran, `%u` without a user). */
export function expandOutputPattern(
  pattern: string,
  job: { jobId: number; name: string; user: string | null; node: string | null },
): string | null {
  return expandPattern(pattern, job);
}

/** Control characters other than newline and tab, and terminal escape sequences, which mean nothing in a prompt. */
export function printable(text: string): string {
  return (
    text
      // biome-ignore lint/suspicious/noControlCharactersInRegex: removing terminal escapes is the point
      .replace(/\u001b\[[0-9;?]*[ -/]*[@-~]/g, '')
      // biome-ignore lint/suspicious/noControlCharactersInRegex: as above
      .replace(/[\u0000-\u0008\u000b-\u001f\u007f]/g, '')
  );
}

/**
 * Reads at most `maxBytes` from the end of a regular file. A file changed
 * before `notBeforeMs` is not this job's (a job id reused by another
 * scheduler or an older state), and is left out. The output paths come from
 * job specs, which anyone allowed to submit writes: a path that leads (through
 * links too) into `protectedDirs` (schedflow's data and configuration, with its
 * keys and history) is never read, nor one through a link, nor one of another user than
 * `ownerUid` (the job's, where known), nor a binary file (see src/lib/file-tail.ts).
 */
export function readTail(
  path: string,
  label: OutputTail['label'],
  maxBytes: number,
  notBeforeMs: number | null,
  protectedDirs: readonly string[] = [],
  ownerUid?: number | null,
): OutputTail {
  const tail = readFileTail(path, {
    maxBytes,
    notBeforeMs,
    protectedDirs,
    ...(ownerUid !== undefined && { ownerUid }),
  });
  const none = (note: string, sizeBytes: number | null = null): OutputTail => ({
    label,
    path,
    text: null,
    sizeBytes,
    note,
  });
  switch (tail.kind) {
    case 'ok':
      if (tail.binary) return none('binary, not text output: left out', tail.sizeBytes);
      return { label, path, text: printable(tail.text), sizeBytes: tail.sizeBytes, note: null };
    case 'protected':
      return none("inside schedflow's own folders: not read");
    case 'missing':
      return none('not found from the machine schedflow runs on (not on a shared file system, or removed)');
    case 'forbidden':
      return none('schedflow may not read it');
    case 'not-a-file':
      return none('not a regular file: not opened');
    case 'link':
      return none('reached through a symbolic link: not followed');
    case 'unsafe-path':
      return none('not an absolute path of plain names: not read');
    case 'not-owner':
      return none(`owned by uid ${tail.uid}, not by the job's user: not read`);
    case 'hard-link':
      return none("a file of schedflow's own user with other names (hard links): not read");
    case 'older':
      return none('last written before the job started: not its output', tail.sizeBytes);
    case 'error':
      return none(`cannot be read (${tail.code})`);
    default:
      return assertNever(tail);
  }
}

/**
 * The tails of a job's output files: the paths the history holds (the scheduler's, or computed
 * when it submitted the job), else computed here from its spec (`standard_output`,
 * `standard_error`, default `slurm-%j.out`, an array task's `slurm-%A_%a.out`) against its working directory (/tmp when it names
 * none, where slurmstepd falls back to). `job.uid` is its user's uid on this host
 * (src/lib/host-users.ts), which its files must belong to; null: not known (read by root, root's files are then refused); absent: not asked.
 */
export function outputTails(
  spec: OutputSpec,
  job: {
    jobId: number;
    name: string;
    user: string | null;
    node: string | null;
    uid?: number | null;
    /** An array task's (`%A`, `%a`; default `slurm-%A_%a.out`). */
    arrayJobId?: number | null;
    arrayTaskId?: number | null;
  },
  maxBytes: number,
  notBeforeMs: number | null,
  protectedDirs: readonly string[] = [],
  stored: { stdout: string | null; stderr: string | null } | null = null,
): OutputTail[] {
  const paths = stored?.stdout ? stored : outputPathsOf(spec, job, '/tmp');
  const stdout = paths.stdout;
  const stderr = paths.stderr;
  const unknown = (label: OutputTail['label'], pattern: unknown): OutputTail => ({
    label,
    path: typeof pattern === 'string' ? pattern : job.arrayTaskId != null ? 'slurm-%A_%a.out' : 'slurm-%j.out',
    text: null,
    sizeBytes: null,
    note: 'its name pattern uses fields schedflow does not know',
  });
  const uid = job.uid;
  if (stdout !== null && stderr === stdout) {
    return [readTail(stdout, 'output', maxBytes, notBeforeMs, protectedDirs, uid)];
  }
  return [
    stdout === null
      ? unknown('stdout', spec.standard_output)
      : readTail(stdout, 'stdout', maxBytes, notBeforeMs, protectedDirs, uid),
    stderr === null
      ? unknown('stderr', spec.standard_error)
      : readTail(stderr, 'stderr', maxBytes, notBeforeMs, protectedDirs, uid),
  ];
}
