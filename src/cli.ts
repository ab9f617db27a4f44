#!/usr/bin/env node
import { Command, CommanderError } from 'commander';
import { EXIT, exitCodeFor } from './cli/exit-codes.js';
import { printError, setRawOutput } from './cli/terminal.js';
import { packageVersion } from './lib/package-info.js';

type Register = (program: Command) => void;

/**
 * Each command's module, loaded only when it is the one asked for: loading every module (the
 * daemon's Fastify, BullMQ, simulator, …) took a second or more before `schedflow jobs list`
 * or `schedflow sched ping` could start. In the order `--help` lists them.
 */
const COMMANDS: readonly [names: readonly string[], load: () => Promise<Register>][] = [
  [['start'], async () => (await import('./cli/start-command.js')).registerStartCommand],
  [['jobs'], async () => (await import('./cli/jobs-command.js')).registerJobsCommand],
  [['runs'], async () => (await import('./cli/runs-command.js')).registerRunsCommand],
  [['tokens'], async () => (await import('./cli/tokens-command.js')).registerTokensCommand],
  [['audit'], async () => (await import('./cli/audit-command.js')).registerAuditCommand],
  [['db'], async () => (await import('./cli/db-command.js')).registerDbCommand],
  [
    ['schema', 'validate', 'pipelines'],
    async () => (await import('./cli/pipelines-command.js')).registerPipelinesCommands,
  ],
  [['sched'], async () => (await import('./cli/sched-command.js')).registerSchedCommand],
  [['sim'], async () => (await import('./cli/sim-command.js')).registerSimCommand],
  [['setup'], async () => (await import('./cli/setup-command.js')).registerSetupCommand],
];

async function main(argv: string[]): Promise<void> {
  const program = new Command()
    .name('schedflow')
    .description('Job-workflow daemon for Slurm clusters, driven through the scheduler REST API')
    .version(packageVersion())
    .showHelpAfterError('(add --help for usage)')
    .option('--raw', "print job names, output and the scheduler's text as they are, terminal escape sequences included")
    .exitOverride();
  // Before any command prints: names and output are escaped unless asked for raw (cli/terminal.ts).
  program.hook('preAction', () => setRawOutput(program.opts<{ raw?: boolean }>().raw === true));
  // The first word that is not an option names the command; `help <command>` names it second.
  const words = argv.slice(2).filter((arg) => !arg.startsWith('-'));
  const asked = words[0] === 'help' ? words[1] : words[0];
  const one = COMMANDS.find(([names]) => asked !== undefined && names.includes(asked));
  // `--version` alone needs no command; the overall help, or an unknown command (commander then
  // suggests the nearest), needs every one.
  const versionOnly = asked === undefined && argv.slice(2).some((arg) => arg === '-V' || arg === '--version');
  for (const [, load] of one ? [one] : versionOnly ? [] : COMMANDS) (await load())(program);
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
    // Escaped: a message may quote a job's name or the scheduler's answer.
    printError(`schedflow: ${(error as Error).message}\n`);
    process.exit(code);
  }
  process.stderr.write(
    `schedflow: unexpected error: ${error instanceof Error ? (error.stack ?? error.message) : String(error)}\n`,
  );
  process.exit(EXIT.internal);
});
