import type { Command } from 'commander';
import { withDaemonDataDir } from './data-dir.js';
import { registerCancel } from './jobs/cancel.js';
import { registerControl } from './jobs/control.js';
import { registerHistory } from './jobs/history.js';
import { registerList } from './jobs/list.js';
import { registerOutput } from './jobs/output.js';
import { registerResubmit } from './jobs/resubmit.js';
import { registerRetryTasks } from './jobs/retry-tasks.js';
import { registerShow } from './jobs/show.js';
import { registerSubmit } from './jobs/submit.js';

/**
 * `schedflow jobs`: one file per subcommand under src/cli/jobs/. Those that change something
 * (submit, cancel, hold, release, update, retry-tasks, resubmit) ask the daemon's local API (src/cli/daemon-api.ts),
 * so a request from the CLI goes through the same door as the API's; the others read the
 * history. What only some subcommands need is imported in them, not here: a `jobs list` should
 * not spend its first second loading what `submit` needs.
 */
export function registerJobsCommand(program: Command): void {
  const jobs = withDaemonDataDir(
    program
      .command('jobs')
      .description('job requests through the running daemon, and its history')
      .option('--json', 'print JSON'),
  );
  for (const register of [
    registerSubmit,
    registerList,
    registerHistory,
    registerShow,
    registerCancel,
    registerControl,
    registerOutput,
    registerRetryTasks,
    registerResubmit,
  ]) {
    register(jobs);
  }
}
