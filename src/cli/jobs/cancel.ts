import type { Command } from 'commander';
import { ConfigError } from '../../errors.js';
import { sleep } from '../../lib/sleep.js';
import { callDaemon, DaemonApiError, segment } from '../daemon-api.js';
import { EXIT } from '../exit-codes.js';
import { print, printError } from '../terminal.js';
import { followRequest } from './follow-request.js';
import { flagsOf, REQUEST_ARGUMENT } from './jobs-flags.js';
import { requestIdOf } from './request-id.js';

/** How long `jobs cancel` asks again while the request is being submitted. */
const SUBMITTING_WAIT_MS = 30_000;

/** The API's answer to `DELETE /api/v1/jobs/:id` (200: cancelled before submission; 202: sent to the scheduler). */
interface CancelAnswer {
  id: string;
  state: string;
  message: string;
}

/** `schedflow jobs cancel <request>`: through the daemon's API, which holds the scheduler clients. */
export function registerCancel(jobs: Command): void {
  jobs
    .command('cancel')
    .description('cancel a request: withdrawn before submission, cancelled by the scheduler after')
    .argument('<request>', REQUEST_ARGUMENT)
    .option('--wait', 'follow it until the history records it ended')
    .action(async (given: string, opts: { wait?: boolean }, cmd: Command) => {
      const flags = flagsOf(cmd);
      const id = await requestIdOf(flags.dataDir, given);
      const ask = () =>
        callDaemon<CancelAnswer>(flags.dataDir, {
          method: 'DELETE',
          path: `/api/v1/jobs/${segment(id)}`,
          nothing: 'nothing was cancelled',
        });
      const until = Date.now() + SUBMITTING_WAIT_MS;
      let answer: Awaited<ReturnType<typeof ask>>;
      for (;;) {
        try {
          answer = await ask();
          break;
        } catch (error) {
          if (!(error instanceof DaemonApiError)) throw error;
          // Being submitted right now: its job may exist upstream any moment; ask again as told.
          if (error.code === 'SCHEDFLOW_ERR_JOB_SUBMITTING' && Date.now() < until) {
            const afterSec = error.retryAfterSec ?? 1;
            if (!flags.json) printError(`being submitted right now; asking again in ${afterSec} s\n`);
            await sleep(afterSec * 1000);
            continue;
          }
          if (error.code === 'SCHEDFLOW_ERR_NOT_FOUND') throw new ConfigError(`no job request ${id} in the history`);
          if (flags.json) print(`${JSON.stringify({ id, error: { code: error.code, message: error.message } })}\n`);
          else printError(`schedflow: ${error.message}\n`);
          // Refused by the scheduler (502) or ended: fix nothing, it is so; unreachable or still submitting: try again.
          process.exitCode =
            error.status === 503 || error.code === 'SCHEDFLOW_ERR_JOB_SUBMITTING' ? EXIT.unavailable : EXIT.refused;
          return;
        }
      }
      const cancelled = answer.status === 200;
      if (flags.json) print(`${JSON.stringify({ ...answer.body, kind: cancelled ? 'cancelled' : 'requested' })}\n`);
      else print(cancelled ? `cancelled request ${id} before it was submitted\n` : `${answer.body.message}\n`);
      if (cancelled || !opts.wait) return;
      const { openCliHistory } = await import('../cli-history.js');
      const history = await openCliHistory(flags.dataDir, { write: false });
      try {
        const row = await followRequest(history, id, flags.json ?? false);
        if (!flags.json) print(`job ${row.jobId ?? '-'} ${row.state}\n`);
      } finally {
        await history.close();
      }
    });
}
