#!/usr/bin/env node
import { Command, CommanderError } from 'commander';
import { registerSimCommand } from './cli/sim-command.js';
import { registerStartCommand } from './cli/start-command.js';
import { SchedflowError } from './errors.js';
import { packageVersion } from './lib/package-info.js';
import { SourceError } from './lib/yaml-source.js';
import { StateDirLockedError } from './sim/job-store.js';
import { SimConfigError } from './sim/sim-config.js';

/** Errors caused by the user's input or setup: shown as their message, without a stack trace. */
const USER_ERRORS = [SimConfigError, StateDirLockedError, SourceError, SchedflowError];

async function main(argv: string[]): Promise<void> {
  const program = new Command()
    .name('schedflow')
    .description('Job-workflow daemon for Slurm clusters, driven through the scheduler REST API')
    .version(packageVersion())
    .showHelpAfterError('(add --help for usage)')
    .exitOverride();
  registerStartCommand(program);
  registerSimCommand(program);
  await program.parseAsync(argv);
}

main(process.argv).catch((error: unknown) => {
  // Help and --version exit 0; every other usage problem is exit 2.
  if (error instanceof CommanderError) process.exit(error.exitCode === 0 ? 0 : 2);
  if (USER_ERRORS.some((cls) => error instanceof cls)) {
    process.stderr.write(`schedflow: ${(error as Error).message}\n`);
    process.exit(2);
  }
  if (error instanceof Error && 'code' in error && error.code === 'EADDRINUSE') {
    process.stderr.write(`schedflow: ${error.message}; pick another port\n`);
    process.exit(2);
  }
  process.stderr.write(
    `schedflow: unexpected error: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
  );
  process.exit(1);
});
