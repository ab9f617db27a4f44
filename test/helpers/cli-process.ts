import { type ChildProcess, spawn } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { beforeAll, inject } from 'vitest';
import { COMPLETE } from './cli-build.js';
import { onHost, type TestHost } from './netns.js';

/**
 * `schedflow` as separate Node processes, the way a user runs it: one-shot commands
 * (`runCli`) and a long-running daemon (`spawnDaemon`). They run the build the test run made
 * once (test/helpers/cli-build.ts, `node <build>/src/cli.js`, as `npm start` does), or
 * src/cli.ts through tsx where a test asks for it (`viaTsx`) or the run made no build (the
 * real-Slurm tier). Every process started here is remembered until it exits, so a test's
 * cleanup can kill what a failed test left behind (`killLeftovers`).
 */

export const REPO = fileURLToPath(new URL('../../', import.meta.url));
export const CLI = join(REPO, 'src', 'cli.ts');
// Absolute, so the child can run with its working directory anywhere.
export const TSX = pathToFileURL(createRequire(join(REPO, 'package.json')).resolve('tsx')).href;

/** How long a file waits for the run's build (under a second of CPU; longer on a loaded machine). */
const BUILD_WAIT_MS = 240_000;

/** `<build>/src/cli.js` once the run's build is complete; undefined when the run makes none. */
let builtCli: string | undefined;

function providedBuild(): { dir: string; errorFile: string } | undefined {
  try {
    return inject('cliBuild');
  } catch {
    return undefined; // not under a vitest project that builds
  }
}

// Before the file's own hooks and tests (its imports run first): every start then has the build.
beforeAll(async () => {
  const build = providedBuild();
  if (!build) return;
  const deadline = Date.now() + BUILD_WAIT_MS;
  while (!existsSync(join(build.dir, COMPLETE))) {
    if (existsSync(build.errorFile)) throw new Error(readFileSync(build.errorFile, 'utf8'));
    if (Date.now() > deadline) throw new Error(`no build of schedflow in ${build.dir} after ${BUILD_WAIT_MS} ms`);
    await new Promise((r) => setTimeout(r, 100));
  }
  builtCli = join(build.dir, 'src', 'cli.js');
}, BUILD_WAIT_MS + 5000);

export interface CliResult {
  code: number | null;
  signal: NodeJS.Signals | null;
  stdout: string;
  stderr: string;
}

export interface ProcessOptions {
  cwd?: string;
  /** The whole environment of the child (default: this process's, without REDIS_URL and SCHEDFLOW_*). */
  env?: NodeJS.ProcessEnv;
  /**
   * Leader of a process group of its own, as a shell runs a job, so a test can signal the
   * whole group (`process.kill(-pid, …)`, what Ctrl-C does) without reaching the test runner.
   * @defaultValue false
   */
  ownProcessGroup?: boolean;
  /**
   * src/cli.ts through tsx rather than the run's build: what a developer runs, and the proof
   * the entry point works under tsx.
   * @defaultValue false
   */
  viaTsx?: boolean;
  /** Runs it on a host of a test network (test/helpers/netns.ts) rather than this one. */
  host?: TestHost;
}

const live = new Set<ChildProcess>();

/**
 * Where the daemons and commands this test process starts register and look for running daemons
 * (src/daemon-registry.ts): a folder of its own, so that a command never finds the daemon of a
 * file running beside it, only those of its own file (files run one after another in a process).
 */
function runtimeDir(): string {
  const dir = join(REPO, '.tmp', 'xdg-runtime', `process-${process.pid}`);
  mkdirSync(dir, { recursive: true, mode: 0o700 });
  return dir;
}

/** This process's environment without the variables that would point a child at another daemon, Redis or history. */
export function cleanEnv(extra: NodeJS.ProcessEnv = {}): NodeJS.ProcessEnv {
  const env: NodeJS.ProcessEnv = { ...process.env };
  for (const name of ['REDIS_URL', 'DATABASE_URL', 'SCHEDFLOW_DATA_DIR', 'SCHEDFLOW_CONFIG_DIR', 'SCHED_TOKEN']) {
    delete env[name];
  }
  return { ...env, XDG_RUNTIME_DIR: runtimeDir(), ...extra };
}

/** Node's arguments before schedflow's own: the run's build, or src/cli.ts through tsx. */
export function schedflowEntry(viaTsx = false): string[] {
  return builtCli && !viaTsx ? [builtCli] : ['--import', TSX, CLI];
}

function start(args: string[], options: ProcessOptions): ChildProcess {
  const node: [string, string[]] = [process.execPath, [...schedflowEntry(options.viaTsx), ...args]];
  const [command, argv] = options.host ? onHost(options.host, ...node) : node;
  const child = spawn(command, argv, {
    cwd: options.cwd ?? REPO,
    env: options.env ?? cleanEnv(),
    stdio: ['ignore', 'pipe', 'pipe'],
    detached: options.ownProcessGroup ?? false,
  });
  live.add(child);
  child.once('exit', () => live.delete(child));
  return child;
}

/** Runs `schedflow <args>` to its end; killed (SIGKILL) at the timeout, which shows in stderr. */
export function runCli(args: string[], options: ProcessOptions & { timeoutMs?: number } = {}): Promise<CliResult> {
  return untilEnd(start(args, options), options.timeoutMs ?? 20_000);
}

/** A started child's output and end; killed (SIGKILL) at the timeout, which shows in stderr. */
export function untilEnd(child: ChildProcess, timeoutMs: number): Promise<CliResult> {
  return new Promise((resolve, reject) => {
    let stdout = '';
    let stderr = '';
    child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
      stdout += chunk;
    });
    child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
      stderr += chunk;
    });
    const timer = setTimeout(() => child.kill('SIGKILL'), timeoutMs);
    child.on('error', reject);
    child.on('close', (code, signal) => {
      clearTimeout(timer);
      if (signal) stderr += `\n[killed by ${signal}; timeout ${timeoutMs} ms]`;
      resolve({ code, signal, stdout, stderr });
    });
  });
}

export interface Exit {
  code: number | null;
  signal: NodeJS.Signals | null;
  /** When the process had exited and its output was read to the end. */
  at: number;
}

export interface DaemonProcess {
  child: ChildProcess;
  pid: number;
  /** Everything written so far. */
  readonly stdout: string;
  readonly stderr: string;
  /** Resolves once the process has exited and its pipes are drained. */
  exited: Promise<Exit>;
  /**
   * Resolves with stdout once the start banner is printed; rejects if the process exits first or
   * at the timeout. @defaultValue {@link READY_TIMEOUT_MS}
   */
  ready(timeoutMs?: number): Promise<string>;
  /** Waits for stdout to match; rejects if the process exits first or at the timeout. */
  waitForOutput(pattern: RegExp, timeoutMs?: number): Promise<RegExpMatchArray>;
  /** Sends a signal and waits for the exit. */
  stop(signal?: NodeJS.Signals): Promise<Exit>;
}

export const READY_BANNER = /schedflow is running \(data in /;

/**
 * How long a start may take to print its banner: a bound for a hang. A start is CPU-bound: about
 * 3.5 s of CPU, most of it loading the daemon's modules; timed step by step, each step grew
 * under load as its share of the CPU shrank, and none waits for something it could skip. Alone
 * it prints its banner within 3 s, beside six busy processes on 2 cores in 15 s; beside the
 * whole suite (`npm test` on 2 cores) it went past 30 s.
 */
export const READY_TIMEOUT_MS = 60_000;

/**
 * `schedflow start --data-dir <dataDir> --config <configDir> --log-level info`
 * as a child process (logs are JSON lines on stdout when stdout is not a TTY).
 */
export function spawnDaemon(
  opts: { dataDir: string; configDir: string; logLevel?: string; extraArgs?: string[] } & ProcessOptions,
): DaemonProcess {
  const args = [
    'start',
    '--data-dir',
    opts.dataDir,
    '--config',
    opts.configDir,
    '--log-level',
    opts.logLevel ?? 'info',
    // The local API on a free port unless a test picks one: never a clash on 8080.
    ...(opts.extraArgs?.includes('--listen') ? [] : ['--listen', '127.0.0.1:0']),
    ...(opts.extraArgs ?? []),
  ];
  return spawnCli(args, opts);
}

/**
 * `schedflow <args>` as a child process a test talks to while it runs (a daemon, or a command
 * that waits: `jobs submit --wait`), rather than one it only waits for the end of.
 */
export function spawnCli(args: string[], opts: ProcessOptions = {}): DaemonProcess {
  const child = start(args, opts);
  let stdout = '';
  let stderr = '';
  const listeners = new Set<() => void>();
  const notify = () => {
    for (const l of [...listeners]) l();
  };
  child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
    stdout += chunk;
    notify();
  });
  child.stderr?.setEncoding('utf8').on('data', (chunk: string) => {
    stderr += chunk;
  });
  let exit: Exit | undefined;
  const exited = new Promise<Exit>((resolve) => {
    child.once('close', (code, signal) => {
      exit = { code, signal, at: Date.now() };
      notify();
      resolve(exit);
    });
  });

  const waitForOutput = (pattern: RegExp, timeoutMs = 30_000) =>
    new Promise<RegExpMatchArray>((resolve, reject) => {
      const check = () => {
        const match = pattern.exec(stdout);
        if (match) finish(() => resolve(match));
        else if (exit)
          finish(() =>
            reject(
              new Error(
                `schedflow ${args[0]} exited (code ${exit?.code}, signal ${exit?.signal}) before printing ${pattern}\n--- stdout\n${stdout}\n--- stderr\n${stderr}`,
              ),
            ),
          );
      };
      const timer = setTimeout(
        () =>
          finish(() =>
            reject(
              new Error(
                `no ${pattern} from schedflow ${args[0]} in ${timeoutMs} ms\n--- stdout\n${stdout}\n--- stderr\n${stderr}`,
              ),
            ),
          ),
        timeoutMs,
      );
      const finish = (settle: () => void) => {
        clearTimeout(timer);
        listeners.delete(check);
        settle();
      };
      listeners.add(check);
      check();
    });

  const handle: DaemonProcess = {
    child,
    pid: child.pid as number,
    get stdout() {
      return stdout;
    },
    get stderr() {
      return stderr;
    },
    exited,
    ready: async (timeoutMs = READY_TIMEOUT_MS) => {
      await waitForOutput(READY_BANNER, timeoutMs);
      return stdout;
    },
    waitForOutput,
    stop: async (signal = 'SIGTERM') => {
      if (!exit) child.kill(signal);
      return exited;
    },
  };
  return handle;
}

/** Kills (SIGKILL) every process this helper started that is still running, and waits for them. */
export async function killLeftovers(): Promise<number> {
  const children = [...live];
  await Promise.all(
    children.map(
      (child) =>
        new Promise<void>((resolve) => {
          if (child.exitCode !== null || child.signalCode !== null) return resolve();
          child.once('exit', () => resolve());
          child.kill('SIGKILL');
        }),
    ),
  );
  return children.length;
}
