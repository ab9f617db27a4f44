import { resolve } from 'node:path';
import type { Command } from 'commander';
import { ConfigError, JobOutputUnavailableError } from '../../errors.js';
import { DEFAULT_TAIL_LINES, jobOutputOf, MAX_TAIL_LINES, OUTPUT_TAIL_MAX_BYTES } from '../../requests/job-output.js';
import { openCliHistory } from '../cli-history.js';
import { parseInteger } from '../options.js';
import { findRequest } from '../request-reference.js';
import { print, printError } from '../terminal.js';
import { flagsOf, REQUEST_ARGUMENT } from './jobs-flags.js';

/** `schedflow jobs output <request>`: the end of a job's output file, read as the API reads it. */
export function registerOutput(jobs: Command): void {
  jobs
    .command('output')
    .description(
      "the end of a job's stdout (or stderr), read from the path the scheduler reported; an array job's tasks each write their own (--task)",
    )
    .argument('<request>', REQUEST_ARGUMENT)
    .option('--stderr', 'the stderr file instead of stdout')
    .option('--tail <lines>', `lines from the end (default ${DEFAULT_TAIL_LINES})`, parseInteger)
    .option(
      '--task <index>',
      "an array job's task: its own file (slurm-%A_%a.out by default); or name the task as 123_4",
      parseInteger,
    )
    .action(async (given: string, opts: { stderr?: boolean; tail?: number; task?: number }, cmd: Command) => {
      const flags = flagsOf(cmd);
      const history = await openCliHistory(flags.dataDir, { write: false });
      try {
        // `123_4` names task 4 of array job 123: its output, as `--task 4` would.
        const { row, task } = await findRequest(history.store, given, { allowTask: true });
        if (task && opts.task !== undefined && opts.task !== task.taskId) {
          throw new ConfigError(
            `${given} names task ${task.taskId}, and --task ${opts.task} another: name the task once (${given}, or request ${row.id} with --task N)`,
          );
        }
        const taskId = opts.task ?? task?.taskId ?? null;
        const tailLines = opts.tail ?? DEFAULT_TAIL_LINES;
        if (tailLines < 1 || tailLines > MAX_TAIL_LINES) {
          throw new ConfigError(`--tail must be 1 to ${MAX_TAIL_LINES} lines`);
        }
        if (opts.task !== undefined && opts.task < 0) throw new ConfigError('--task must be a task index, 0 or more');
        const output = await jobOutputOf(
          history.store,
          row,
          opts.stderr ? 'stderr' : 'stdout',
          { tailLines, maxBytes: OUTPUT_TAIL_MAX_BYTES, protectedDirs: [resolve(flags.dataDir)] },
          taskId,
        );
        if (output.kind === 'unavailable') throw new JobOutputUnavailableError(output.code, output.message);
        if (flags.json) {
          print(`${JSON.stringify(output)}\n`);
          return;
        }
        if (output.truncated || output.sameFile) {
          const notes = [
            ...(output.truncated ? [`the last ${output.lines} lines of ${output.sizeBytes} bytes`] : []),
            ...(output.sameFile ? ['stderr goes to the stdout file'] : []),
          ];
          printError(`==> ${output.path} (${notes.join('; ')}) <==\n`);
        }
        print(output.text);
      } finally {
        await history.close();
      }
    });
}
