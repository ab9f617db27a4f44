import type { Command } from 'commander';
import type { JobRequestRow } from '../../db/schema.js';
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
export function shownRow(row: JobRequestRow): JobRequestRow {
  return { ...row, spec: specView(row.spec) };
}
