import type { Command } from 'commander';
import { listRequests } from '../../db/requests.js';
import { type JobRequestRow, REQUEST_STATES, type RequestState } from '../../db/schema.js';
import { ConfigError } from '../../errors.js';
import { openCliHistory } from '../cli-history.js';
import { formatDuration, table } from '../format.js';
import { parseInteger } from '../options.js';
import { print } from '../terminal.js';
import { flagsOf, pendingCell, shownRow, time } from './jobs-flags.js';

/** `schedflow jobs list`: recent requests from the history, newest first. */
export function registerList(jobs: Command): void {
  jobs
    .command('list')
    .description('recent job requests, newest first')
    .option('--state <states>', `comma-separated: ${REQUEST_STATES.join(', ')}`)
    .option('--limit <n>', 'how many (default 50)', parseInteger)
    .action(async (opts: { state?: string; limit?: number }, cmd: Command) => {
      const flags = flagsOf(cmd);
      const states = opts.state?.split(',').map((s) => s.trim().toLowerCase());
      const unknown = states?.filter((s) => !(REQUEST_STATES as readonly string[]).includes(s));
      if (unknown?.length)
        throw new ConfigError(`unknown state ${unknown.join(', ')}; states are ${REQUEST_STATES.join(', ')}`);
      const history = await openCliHistory(flags.dataDir, { write: false });
      try {
        const rows = await listRequests(history.store, {
          state: states as RequestState[] | undefined,
          limit: opts.limit,
        });
        print(
          flags.json
            ? `${JSON.stringify(rows.map(shownRow), null, 2)}\n`
            : `${table(['REQUEST', 'NAME', 'PROFILE', 'STATE', 'PENDING', 'JOBID', 'CREATED', 'ELAPSED', 'EXIT'], rows.map(requestRow))}\n`,
        );
      } finally {
        await history.close();
      }
    });
}

function requestRow(r: JobRequestRow): string[] {
  const elapsed = r.startedAt && r.endedAt ? formatDuration(Math.round((r.endedAt - r.startedAt) / 1000)) : '-';
  return [
    r.id,
    r.name,
    r.profile,
    r.heldAt === null ? r.state : `${r.state} (held)`,
    pendingCell(r),
    r.jobId === null ? '-' : String(r.jobId),
    time(r.createdAt),
    elapsed,
    r.exitCode === null ? '-' : String(r.exitCode),
  ];
}
