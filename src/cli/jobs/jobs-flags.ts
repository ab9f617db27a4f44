import type { Command } from 'commander';
import type { JobRequestRow } from '../../db/schema.js';
import { pendingView } from '../../views/pending-view.js';
import { specView } from '../../views/views.js';

/** The flags every `schedflow jobs` subcommand reads: `--data-dir` (resolved) and `--json`. */
export interface JobsFlags {
  dataDir: string;
  json?: boolean;
}

export const flagsOf = (cmd: Command): JobsFlags => cmd.optsWithGlobals() as JobsFlags;

/** How the commands that take a request describe it in their help. */
export const REQUEST_ARGUMENT = 'request id, a unique start of one, or its Slurm job id (123; 123_4 for an array task)';

/** A time of the history as the terminal's locale writes it, or `-`. */
export const time = (ms: number | null): string => (ms === null ? '-' : new Date(ms).toLocaleString());

/** A request's row as the CLI prints it: its spec as the API shows it (secret-looking environment values masked). */
export function shownRow(row: JobRequestRow): JobRequestRow & { pending: ReturnType<typeof pendingView> } {
  return { ...row, spec: specView(row.spec), pending: pendingView(row) };
}

/**
 * The PENDING column of `jobs list`: a pending request's reason and expected start
 * (`Resources, start ~14:05`), `-` for any other.
 */
export function pendingCell(row: JobRequestRow): string {
  const pending = pendingView(row);
  if (!pending) return '-';
  const start = row.expectedStartAt === null ? null : `start ~${time(row.expectedStartAt)}`;
  return [pending.reason ?? 'waiting', start].filter(Boolean).join(', ');
}

/** `jobs show`'s lines of why a pending request waits; none for a request that is not pending. */
export function pendingLines(row: JobRequestRow): string[] {
  const pending = pendingView(row);
  if (!pending) return [];
  return [
    `waits     ${pending.reason === null ? 'the scheduler has given no reason yet' : `${pending.reason}: ${pending.meaning}`}`,
    ...(pending.action ? [`to do     ${pending.action}`] : []),
    `expected  ${row.expectedStartAt === null ? 'no start forecast from the scheduler' : `${time(row.expectedStartAt)} (the scheduler's forecast)`}`,
  ];
}
