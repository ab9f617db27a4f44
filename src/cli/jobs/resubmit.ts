import type { Command } from 'commander';
import { ConfigError } from '../../errors.js';
import { describeSuggestion } from '../../summaries/prompt.js';
import { openCliHistory } from '../cli-history.js';
import { callDaemon, segment } from '../daemon-api.js';
import { findRequest } from '../request-reference.js';
import { print } from '../terminal.js';
import { flagsOf, REQUEST_ARGUMENT } from './jobs-flags.js';

/** `schedflow jobs resubmit <request> --apply-suggestion`: its summary's change applied, through the daemon's API. */
export function registerResubmit(jobs: Command): void {
  jobs
    .command('resubmit')
    .description("queue a request again with its summary's suggested change (more memory, a longer limit, ...)")
    .argument('<request>', REQUEST_ARGUMENT)
    .option('--apply-suggestion', 'apply the suggested change (required: nothing is re-submitted without it)')
    .action(async (given: string, opts: { applySuggestion?: boolean }, cmd: Command) => {
      const flags = flagsOf(cmd);
      // The change is read and said from the history; only applying it is the daemon's.
      const history = await openCliHistory(flags.dataDir, { write: false });
      let id: string;
      let change: string;
      try {
        id = (await findRequest(history.store, given)).row.id;
        const { suggestionToApply } = await import('../../summaries/resubmit.js');
        const { summary } = await suggestionToApply(history.store, id);
        change = describeSuggestion(summary.suggestion as NonNullable<typeof summary.suggestion>);
      } finally {
        await history.close();
      }
      if (!opts.applySuggestion) {
        throw new ConfigError(
          `the suggested change is: ${change}; to apply it: schedflow jobs resubmit ${id} --apply-suggestion`,
        );
      }
      // Applying again answers the request made the first time: one request per summary.
      const { body } = await callDaemon<{ id: string; changes: Record<string, unknown> }>(flags.dataDir, {
        method: 'POST',
        path: `/api/v1/jobs/${segment(id)}/resubmit`,
        nothing: 'nothing was queued',
      });
      print(
        flags.json
          ? `${JSON.stringify({ requestId: body.id, resubmits: id, changes: body.changes })}\n`
          : `queued request ${body.id}, re-submitting ${id} with ${change}\n`,
      );
    });
}
