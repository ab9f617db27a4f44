import type { Command } from 'commander';
import { readDaemonInfo } from '../../daemon-info.js';
import { callDaemon, DaemonApiError } from '../daemon-api.js';
import { EXIT } from '../exit-codes.js';
import { print } from '../terminal.js';
import { onInterrupt } from '../wait-interrupt.js';
import { followRequest } from './follow-request.js';
import { flagsOf } from './jobs-flags.js';

/** `schedflow jobs submit <file>`: a job file to the daemon's door (its local API); `--wait` follows it. */
export function registerSubmit(jobs: Command): void {
  jobs
    .command('submit')
    .description('send a job file to the daemon, which records and queues it; --wait follows it to the end')
    .argument('<file>', 'job file (YAML or JSON job spec, or an sbatch script)')
    .option('--profile <name>', 'scheduler profile (default: the daemon’s first)')
    .option('--wait', 'print each transition; exit 0 only when the job COMPLETED')
    .option('--summarize', 'a summary when it ends, whatever the daemon’s setting')
    .option('--no-summarize', 'no summary when it ends, whatever the daemon’s setting')
    .action(async (file: string, opts: { profile?: string; wait?: boolean; summarize?: boolean }, cmd: Command) => {
      const flags = flagsOf(cmd);
      // Read and checked here, so a mistake is said with its line in the file.
      const { readJobFile } = await import('../job-file.js');
      const { spec, retry } = readJobFile(file);
      const { body } = await callDaemon<{ id: string }>(flags.dataDir, {
        method: 'POST',
        path: '/api/v1/jobs',
        body: {
          spec,
          ...(opts.profile !== undefined && { profile: opts.profile }),
          ...(opts.summarize !== undefined && { summarize: opts.summarize }),
          ...(retry !== undefined && { retry }),
        },
        nothing: 'nothing was queued',
      }).catch((error: unknown) => {
        throw refusalOf(error, file);
      });
      const requestId = body.id;
      const profile = opts.profile ?? readDaemonInfo(flags.dataDir).defaultProfile;
      print(
        flags.json
          ? `${JSON.stringify({ requestId, profile })}\n`
          : `queued request ${requestId} (profile ${profile})\n`,
      );
      if (!opts.wait) return;
      const { openCliHistory } = await import('../cli-history.js');
      const history = await openCliHistory(flags.dataDir, { write: false });
      // Ctrl-C stops the waiting, not the job: say so, and how to cancel it.
      const stopWatching = onInterrupt(
        () =>
          `schedflow: stopped waiting; request ${requestId} goes on in the daemon (nothing was cancelled). To cancel it: schedflow jobs cancel ${requestId} --data-dir ${flags.dataDir}`,
      );
      try {
        const row = await followRequest(history, requestId, flags.json ?? false);
        if (!flags.json) {
          print(
            `job ${row.jobId ?? '-'} ${row.state}${row.exitCode !== null ? ` (exit ${row.exitCode})` : ''}${row.errorMessage ? `: ${row.errorMessage}` : ''}\n`,
          );
        }
        process.exitCode = row.state === 'completed' ? EXIT.ok : EXIT.refused;
      } finally {
        stopWatching();
        await history.close();
      }
    });
}

/**
 * The door's refusal (422, or 503 for a profile not connected yet) names what it refused: the
 * file here, `request <id>` for a retry. Any other error is said as the daemon said it.
 */
export function refusalOf(error: unknown, where: string): unknown {
  if (!(error instanceof DaemonApiError)) return error;
  if (error.status !== 422 && error.code !== 'SCHEDFLOW_ERR_PROFILE_NOT_CONNECTED') return error;
  return new DaemonApiError(error.code, `${where}: ${error.message}`, error.status, error.retryAfterSec);
}
