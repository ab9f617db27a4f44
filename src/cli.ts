#!/usr/bin/env node
import { Command, CommanderError } from 'commander';
import { EXIT, exitCodeFor } from './cli/exit-codes.js';
import { registerJobsCommand } from './cli/jobs-command.js';
import { registerPipelinesCommands } from './cli/pipelines-command.js';
import { registerSchedCommand } from './cli/sched-command.js';
import { registerSetupCommand } from './cli/setup-command.js';
import { registerSimCommand } from './cli/sim-command.js';
import { registerStartCommand } from './cli/start-command.js';
import { registerTokensCommand } from './cli/tokens-command.js';
import { packageVersion } from './lib/package-info.js';

async function main(argv: string[]): Promise<void> {
  const program = new Command()
    .name('schedflow')
    .description('Job-workflow daemon for Slurm clusters, driven through the scheduler REST API')
    .version(packageVersion())
    .showHelpAfterError('(add --help for usage)')
    .exitOverride();
  registerStartCommand(program);
  registerJobsCommand(program);
  registerTokensCommand(program);
  registerPipelinesCommands(program);
  registerSchedCommand(program);
  registerSimCommand(program);
  registerSetupCommand(program);
  await program.parseAsync(argv);
}

main(process.argv).catch((error: unknown) => {
  // Help and --version exit 0; every other usage problem is exit 2.
  if (error instanceof CommanderError) process.exit(error.exitCode === 0 ? EXIT.ok : EXIT.usage);
  if (error instanceof Error && 'code' in error && error.code === 'EADDRINUSE') {
    process.stderr.write(`schedflow: ${error.message}; pick another port\n`);
    process.exit(EXIT.usage);
  }
  const code = exitCodeFor(error);
  if (code !== EXIT.internal) {
    // A mistake of the user's or the upstream's answer: the message says what to do, no stack trace.
    process.stderr.write(`schedflow: ${(error as Error).message}\n`);
    process.exit(code);
  }
  process.stderr.write(
    `schedflow: unexpected error: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
  );
  process.exit(EXIT.internal);
});
