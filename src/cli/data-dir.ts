import { existsSync, statSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { type Command, Option } from 'commander';
import { DAEMON_INFO_FILE, DEFAULT_DATA_DIR } from '../daemon-info.js';
import { type DaemonRegistration, registryDirsToRead, runningDaemons } from '../daemon-registry.js';
import { ConfigError } from '../errors.js';
import { refuseSharedAccess } from '../lib/owner-only.js';
import { cliInvocation } from './invocation.js';

/**
 * The data dir a command of the shell works on (`jobs`, `runs`, `tokens`): `--data-dir`, else
 * `SCHEDFLOW_DATA_DIR`, else the data dir of the daemon running for this user (as it registered
 * itself, src/daemon-registry.ts), else `./data`. Commands started in another folder than the
 * daemon's found no history in their own `./data` and made one: a token printed there was
 * refused by the daemon (401). Now a command makes no history where it was not asked to: where
 * there is none, it refuses and says where the running daemon's is. The one exception is
 * `tokens` on a data dir named by `--data-dir` (or by SCHEDFLOW_DATA_DIR while no daemon runs):
 * tokens made before a first start (provisioning), in the history that start will use.
 */

export interface ChosenDataDir {
  /** Absolute. */
  dir: string;
  from: 'flag' | 'env' | 'daemon' | 'default';
}

export function chooseDataDir(
  flag: string | undefined,
  env: NodeJS.ProcessEnv,
  running: () => DaemonRegistration[] = () => runningDaemons(registryDirsToRead(env)),
): ChosenDataDir {
  if (flag !== undefined) return { dir: resolve(flag), from: 'flag' };
  const fromEnv = env.SCHEDFLOW_DATA_DIR?.trim();
  if (fromEnv) return { dir: resolve(fromEnv), from: 'env' };
  const here = resolve(DEFAULT_DATA_DIR);
  const daemons = running();
  if (daemons.length === 1) return { dir: (daemons[0] as DaemonRegistration).dataDir, from: 'daemon' };
  // Several: the one of this folder, as before there were registrations; else the user says.
  if (daemons.length > 1) {
    if (daemons.some((d) => d.dataDir === here)) return { dir: here, from: 'daemon' };
    throw new ConfigError(
      `several schedflow daemons are running for you (${describe(daemons)}): say which with --data-dir <dir> or SCHEDFLOW_DATA_DIR`,
    );
  }
  return { dir: here, from: 'default' };
}

/**
 * Whether `dir` holds a history a command may use: a daemon has run there (daemon.json), or a
 * SQLite history is there, or the shell names a PostgreSQL one (DATABASE_URL).
 */
function hasHistory(dir: string, env: NodeJS.ProcessEnv): boolean {
  return (
    existsSync(join(dir, DAEMON_INFO_FILE)) || existsSync(join(dir, 'history.sqlite')) || !!env.DATABASE_URL?.trim()
  );
}

/**
 * Refuses a data dir with no history, naming the running daemon's when there is one.
 * `mayMake`: the command may make the history of a data dir named outright when no daemon runs.
 */
export function refuseWithoutHistory(
  chosen: ChosenDataDir,
  env: NodeJS.ProcessEnv,
  options: { mayMake: boolean },
  running: () => DaemonRegistration[] = () => runningDaemons(registryDirsToRead(env)),
): void {
  // Said first: a data dir others can read is refused whatever it holds (src/lib/owner-only.ts).
  if (existsSync(chosen.dir)) refuseSharedAccess(chosen.dir, statSync(chosen.dir), 'data dir');
  if (hasHistory(chosen.dir, env)) return;
  // `--data-dir` on the command line is this command's own choice (provisioning a deployment
  // beside one that runs, say); SCHEDFLOW_DATA_DIR may be a shell's stale setting, so it makes a
  // history only while no daemon runs to have meant instead.
  if (options.mayMake && (chosen.from === 'flag' || (chosen.from === 'env' && running().length === 0))) return;
  const how =
    chosen.from === 'flag'
      ? '--data-dir'
      : chosen.from === 'env'
        ? 'SCHEDFLOW_DATA_DIR'
        : `the default, ${DEFAULT_DATA_DIR}`;
  const head = `no schedflow history in ${chosen.dir} (${how}): no daemon has run with that data dir, and nothing was made there`;
  const elsewhere = chosen.from === 'daemon' ? [] : running().filter((d) => d.dataDir !== chosen.dir);
  if (elsewhere.length === 1) {
    const [daemon] = elsewhere as [DaemonRegistration];
    throw new ConfigError(
      `${head}; the daemon running for you (pid ${daemon.pid}) keeps its history in ${daemon.dataDir}: run this again with --data-dir ${daemon.dataDir}${chosen.from === 'env' ? ', or unset SCHEDFLOW_DATA_DIR' : ''}`,
    );
  }
  if (elsewhere.length > 1) {
    throw new ConfigError(`${head}; daemons are running for you on ${describe(elsewhere)}: name one with --data-dir`);
  }
  throw new ConfigError(
    `${head}; no schedflow daemon is running for you: start one (npm start, or ${cliInvocation()} start --data-dir ${chosen.dir}) and run this again`,
  );
}

function describe(daemons: readonly DaemonRegistration[]): string {
  return daemons.map((d) => `${d.dataDir}, pid ${d.pid}`).join('; ');
}

/**
 * Gives `command` (and its subcommands) the `--data-dir` option, resolved before any action as
 * the file's comment says: each action reads `dataDir` as an absolute folder that holds a history
 * (or, `mayMake`, one named outright with no daemon running, whose history it may make).
 */
export function withDaemonDataDir(command: Command, options: { mayMake: boolean } = { mayMake: false }): Command {
  return command
    .addOption(
      new Option(
        '--data-dir <dir>',
        `data dir of the daemon (default: SCHEDFLOW_DATA_DIR, else the running daemon's, else ${DEFAULT_DATA_DIR})`,
      ),
    )
    .hook('preAction', (self) => {
      const chosen = chooseDataDir(self.getOptionValue('dataDir') as string | undefined, process.env);
      refuseWithoutHistory(chosen, process.env, options);
      self.setOptionValue('dataDir', chosen.dir);
    });
}
