import { execFileSync } from 'node:child_process';
import { closeSync, existsSync, mkdirSync, openSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { freePort } from '../helpers/free-port.js';
import { pollUntil, type Spawned, sleep, spawnTracked, trackPid } from './processes.js';
import { ALICE_TOKEN, CLI } from './upstream.js';

export interface DaemonOptions {
  /** The scheduler URL the profile points at (the counting proxy). */
  schedulerUrl: string;
  /** An external Redis; none: the daemon starts its private redis-server. */
  redisUrl?: string;
  logLevel?: 'info' | 'debug';
  /** The profile, instead of the simulator's (bearer token, account lab). */
  profile?: Record<string, unknown>;
  /** Job spec fields every submission adds (a real cluster needs a working directory). */
  specExtra?: Record<string, unknown>;
  /** Options for node itself (a benchmark's `--cpu-prof`). */
  nodeArgs?: string[];
  /**
   * The daemon's own timings (poll floor, reconcile, lock), as users run it, instead of the
   * trials' faster ones: a benchmark measures what a deployment costs, not what a trial does.
   */
  userTimings?: boolean;
  /** More of the daemon's settings (SCHEDFLOW_*), as a deployment's environment would set them. */
  settings?: Record<string, string>;
  /** Scopes of the harness's API token. @defaultValue 'submit,read' */
  tokenScopes?: string;
}

export interface ShutdownReport {
  exitMs: number;
  /** Killed by the harness after the wait ran out. */
  forced: boolean;
  code: number | null;
  stepsRun: string[];
  stepsMissing: string[];
  deadlinePassed: boolean;
}

/**
 * `schedflow start` as a real separate process (dist/src/cli.js, in its own process group)
 * on a data dir of its own, a profile pointing at the upstream and a fixed API port, so a
 * restarted daemon answers where the last one did. Logs go to files (JSON lines on stdout).
 */
export class DaemonUnderTest {
  proc: Spawned | undefined;
  readonly dataDir: string;
  readonly configDir: string;
  readonly logFile: string;
  readonly errFile: string;
  apiUrl = '';
  apiToken = '';
  get specExtra(): Record<string, unknown> {
    return this.options.specExtra ?? {};
  }
  private starts = 0;

  constructor(
    readonly root: string,
    private readonly options: DaemonOptions,
  ) {
    this.dataDir = join(root, 'data');
    this.configDir = join(root, 'config');
    this.logFile = join(root, 'daemon.log');
    this.errFile = join(root, 'daemon.stderr');
  }

  async setup(): Promise<void> {
    mkdirSync(this.dataDir, { recursive: true, mode: 0o700 });
    mkdirSync(join(this.configDir, 'profiles'), { recursive: true });
    mkdirSync(join(this.configDir, 'pipelines'), { recursive: true });
    const tokenFile = join(this.configDir, 'alice.token');
    writeFileSync(tokenFile, ALICE_TOKEN, { mode: 0o600 });
    const profile = this.options.profile ?? {
      url: this.options.schedulerUrl,
      auth: { type: 'bearer', tokenFile },
      account: 'lab',
      version: 'v0.0.44',
    };
    writeFileSync(join(this.configDir, 'profiles', 'chaos.yaml'), JSON.stringify(profile));
    // In the daemon's environment: with DATABASE_URL among its settings, the token goes where it reads them.
    this.apiToken = execFileSync(
      process.execPath,
      [
        ...[CLI, 'tokens', 'create', '--name', 'chaos'],
        ...['--scopes', this.options.tokenScopes ?? 'submit,read', '--data-dir', this.dataDir],
      ],
      { encoding: 'utf8', env: this.env, stdio: ['ignore', 'pipe', 'ignore'] },
    ).trim();
    this.apiUrl = `http://127.0.0.1:${await freePort()}`;
  }

  get env(): NodeJS.ProcessEnv {
    const env: NodeJS.ProcessEnv = { ...process.env };
    for (const name of Object.keys(env)) if (name.startsWith('SCHEDFLOW_') || name === 'REDIS_URL') delete env[name];
    return {
      ...env,
      ...(this.options.redisUrl && { REDIS_URL: this.options.redisUrl }),
      // Faster than the defaults so a trial takes seconds, not minutes; each says why.
      ...(!this.options.userTimings && {
        SCHEDFLOW_POLL_FLOOR_MS: '1000', // the simulator's cache lifetime is 2 s
        SCHEDFLOW_RECONCILE_EVERY_MS: '10000',
        SCHEDFLOW_LOCK_DURATION_MS: '5000', // a killed worker's submit is taken up again in ~10 s, not ~60 s
      }),
      SCHEDFLOW_API_RATE_LIMIT: '100000', // the harness's bursts must not meet the local API's own limit
      ...this.options.settings,
    };
  }

  /** Starts the daemon and waits until its API answers /healthz. */
  async start(timeoutMs = 30_000): Promise<void> {
    this.starts++;
    const out = openSync(this.logFile, 'a');
    const err = openSync(this.errFile, 'a');
    const listen = this.apiUrl.replace('http://', '');
    const args = [
      ...(this.options.nodeArgs ?? []),
      CLI,
      'start',
      ...['--data-dir', this.dataDir, '--config', this.configDir, '--listen', listen],
    ];
    args.push('--log-level', this.options.logLevel ?? 'info');
    this.proc = spawnTracked(process.execPath, args, { cwd: this.root, env: this.env, stdio: ['ignore', out, err] });
    closeSync(out);
    closeSync(err);
    const proc = this.proc;
    const up = await pollUntil(
      async () => {
        if (!proc.alive()) throw new Error('exited');
        const res = await fetch(`${this.apiUrl}/healthz`, { signal: AbortSignal.timeout(1000) });
        return res.ok ? true : undefined;
      },
      timeoutMs,
      100,
    ).catch(() => undefined);
    if (!up) {
      const exited = !proc.alive();
      throw new Error(
        `daemon start #${this.starts} ${exited ? 'exited' : `did not answer /healthz in ${timeoutMs} ms`}; log: ${this.logFile}`,
      );
    }
    this.trackPrivateRedis();
  }

  /** The private redis-server's pid (from its pid file), if the daemon has one. */
  privateRedisPid(): number | undefined {
    const file = join(this.dataDir, 'redis', 'redis.pid');
    if (!existsSync(file)) return undefined;
    const pid = Number(readFileSync(file, 'utf8').trim());
    return Number.isInteger(pid) && pid > 0 ? pid : undefined;
  }

  private trackPrivateRedis(): void {
    const pid = this.privateRedisPid();
    if (pid) trackPid(pid);
  }

  /** kill -9 of the daemon process alone (its private redis-server lives on, as after a crash). */
  async kill9(): Promise<void> {
    const proc = this.proc;
    if (!proc?.alive()) return;
    process.kill(proc.pid, 'SIGKILL');
    await proc.exited;
  }

  /** kill -9 of the private redis-server. */
  killPrivateRedis(): boolean {
    const pid = this.privateRedisPid();
    if (!pid) return false;
    try {
      process.kill(pid, 'SIGKILL');
      return true;
    } catch {
      return false;
    }
  }

  /**
   * Sends a signal to the daemon process or to its whole process group (what a terminal's
   * Ctrl-C and many supervisors do), waits up to `waitMs` for the exit (then SIGKILL) and
   * reads from the log which shutdown steps ran.
   */
  async signal(signal: 'SIGTERM' | 'SIGINT', group: boolean, waitMs: number): Promise<ShutdownReport> {
    const proc = this.proc;
    if (!proc?.alive()) throw new Error('the daemon is not running');
    const logStart = existsSync(this.logFile) ? readFileSync(this.logFile).length : 0;
    const sentAt = Date.now();
    process.kill(group ? -proc.pid : proc.pid, signal);
    const exit = await Promise.race([proc.exited, sleep(waitMs).then(() => undefined)]);
    let forced = false;
    if (!exit) {
      forced = true;
      process.kill(-proc.pid, 'SIGKILL');
    }
    const final = await proc.exited;
    const exitMs = final.at - sentAt;
    await sleep(100);
    const lines = readFileSync(this.logFile).subarray(logStart).toString('utf8').split('\n');
    // The daemon logs each shutdown step as it ends, each one that timed out or failed, and
    // `shutdown complete` after the last: a shutdown ran every step when it completed and
    // none timed out or failed (read from the log, so the harness needs no list of steps).
    const stepsRun: string[] = [];
    const stepsMissing: string[] = [];
    let complete = false;
    for (const line of lines) {
      if (!line.startsWith('{')) continue;
      try {
        const entry = JSON.parse(line) as { msg?: string; step?: string };
        if (entry.msg === 'shutdown step done' && entry.step) stepsRun.push(entry.step);
        if (entry.msg === 'shutdown complete') complete = true;
        if (entry.step && (entry.msg?.startsWith('shutdown step timed out') || entry.msg === 'shutdown step failed'))
          stepsMissing.push(entry.step);
      } catch {
        // a partial last line
      }
    }
    if (!complete) stepsMissing.push('(shutdown never completed)');
    return {
      exitMs,
      forced,
      code: final.code,
      stepsRun,
      stepsMissing,
      deadlinePassed: stepsMissing.length > 0,
    };
  }

  /** Stops it: SIGTERM, then SIGKILL to its group after `waitMs`. */
  async stop(waitMs = 15_000): Promise<void> {
    const proc = this.proc;
    if (!proc?.alive()) return;
    proc.child.kill('SIGTERM');
    const exit = await Promise.race([proc.exited, sleep(waitMs).then(() => undefined)]);
    if (!exit) process.kill(-proc.pid, 'SIGKILL');
    await proc.exited;
  }
}
