#!/usr/bin/env node
import { Command, CommanderError } from 'commander';
import { registerSimCommand } from './cli/sim-command.js';
import { registerStartCommand } from './cli/start-command.js';
import { SimConfigError } from './sim/sim-config.js';

/** Errors caused by the user's input: shown as one line, without a stack trace. */
const USER_ERRORS = [SimConfigError];

async function main(argv: string[]): Promise<void> {
  const program = new Command()
    .name('schedflow')
    .description('Job-workflow daemon for Slurm clusters, driven through the scheduler REST API')
    .showHelpAfterError()
    .exitOverride();
  registerStartCommand(program);
  registerSimCommand(program);
  await program.parseAsync(argv);
}

main(process.argv).catch((error: unknown) => {
  if (error instanceof CommanderError) process.exit(error.exitCode);
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
