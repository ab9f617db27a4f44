import type { Command } from 'commander';
import { ConfigError } from '../errors.js';
import { withDaemonDataDir } from './data-dir.js';
import { EXIT } from './exit-codes.js';
import { cancelThroughDaemon } from './jobs-command.js';
import { print, printError } from './terminal.js';

interface RunsFlags {
  dataDir: string;
  json?: boolean;
}

/** `schedflow runs`: pipeline runs of the running daemon (cancel; list and show are the API's and the UI's). */
export function registerRunsCommand(program: Command): void {
  const runs = withDaemonDataDir(
    program.command('runs').description('pipeline runs of the running daemon').option('--json', 'print JSON'),
  );

  runs
    .command('cancel')
    .description('cancel a run: steps not submitted are withdrawn, submitted ones cancelled; it ends cancelled')
    .argument('<run>', 'run id')
    .action(async (id: string, _opts, cmd: Command) => {
      const flags = cmd.optsWithGlobals() as RunsFlags;
      const answer = await cancelThroughDaemon(flags.dataDir, { of: 'run', id });
      if (flags.json) print(`${JSON.stringify({ id, ...answer })}\n`);
      switch (answer.kind) {
        case 'not_found':
          throw new ConfigError(`no pipeline run ${id} in the history`);
        case 'error':
          process.exitCode = answer.retryable ? EXIT.unavailable : EXIT.refused;
          if (!flags.json) printError(`schedflow: ${answer.message}\n`);
          return;
        case 'ended':
          process.exitCode = EXIT.refused;
          if (!flags.json) {
            printError(
              `schedflow: run ${id} has already ended: ${answer.state}${answer.detail ? ` (${answer.detail})` : ''}\n`,
            );
          }
          return;
        case 'cancelled':
        case 'cancelling': {
          if (flags.json) return;
          const head =
            answer.kind === 'cancelling'
              ? `cancelling run ${id}: it ends cancelled once its steps have ended`
              : answer.already
                ? `run ${id} was already cancelled${answer.detail ? ` (${answer.detail})` : ''}`
                : `cancelled run ${id}`;
          const lines = [
            head,
            ...(answer.steps ?? []).map(
              (s) => `  ${s.step}: ${s.outcome.replace('_', ' ')}${s.detail ? ` (${s.detail})` : ''}`,
            ),
          ];
          print(`${lines.join('\n')}\n`);
          return;
        }
      }
    });
}
