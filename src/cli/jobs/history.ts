import type { Command } from 'commander';
import { history as historyRows } from '../../db/accounting.js';
import { openCliHistory } from '../cli-history.js';
import { formatDuration, table } from '../format.js';
import { parseInteger, parseSince } from '../options.js';
import { print } from '../terminal.js';
import { flagsOf } from './jobs-flags.js';

/** `schedflow jobs history`: the accounting records beside the local state. */
export function registerHistory(jobs: Command): void {
  jobs
    .command('history')
    .description("accounting records of the profiles' accounts, schedflow's and external jobs, beside the local state")
    .option('--since <time>', 'e.g. 2h, 3d, 2026-11-01, Unix seconds', (v) => parseSince(v))
    .option('--profile <name>', 'one profile only')
    .option('--limit <n>', 'how many (default 100)', parseInteger)
    .action(async (opts: { since?: number; profile?: string; limit?: number }, cmd: Command) => {
      const flags = flagsOf(cmd);
      const history = await openCliHistory(flags.dataDir, { write: false });
      try {
        const rows = await historyRows(history.store, {
          sinceSec: opts.since,
          profile: opts.profile,
          limit: opts.limit,
        });
        print(
          flags.json
            ? `${JSON.stringify(rows, null, 2)}\n`
            : `${table(
                [
                  'JOBID',
                  'NAME',
                  'ACCOUNT',
                  'USER',
                  'SLURM STATE',
                  'LOCAL STATE',
                  'EXIT',
                  'ELAPSED',
                  'CPUS',
                  'REQUEST',
                ],
                rows.map((r) => [
                  String(r.jobId),
                  r.name,
                  r.account,
                  r.user,
                  r.accountingState,
                  r.taskId === null
                    ? (r.localState ?? '(external)')
                    : `task ${r.taskId}: ${r.taskState} (array ${r.localState})`,
                  r.exitCode === null ? '-' : String(r.exitCode),
                  formatDuration(r.elapsedSec),
                  r.cpus === null ? '-' : String(r.cpus),
                  r.requestId ?? '-',
                ]),
              )}\n`,
        );
      } finally {
        await history.close();
      }
    });
}
