import { readFileSync, writeFileSync } from 'node:fs';
import { request } from 'node:http';
import { join } from 'node:path';
import { ADMIN_TOKEN_FILE } from '../../src/sim/admin-token.js';
import { freePort } from '../helpers/free-port.js';
import { pollUntil, type Spawned, spawnTracked } from './processes.js';

export const REPO = new URL('../../', import.meta.url).pathname;
export const CLI = join(REPO, 'dist', 'src', 'cli.js');
export const ALICE_TOKEN = 'alice-token-0123456789abcdef';

/** A job in the simulator's saved job table (its `jobs.json`). */
export interface SimJob {
  jobId: number;
  name: string;
  comment: string;
  state: string;
  exitCode: number | null;
  /** An array task's array (its first job id); absent for a single job. */
  arrayJobId?: number;
}

/** Where the scheduler's own record of jobs is read: the simulator's job table, or sacct. */
export interface JobTable {
  jobs(): Promise<SimJob[]>;
}

export interface RateLimit {
  capacity: number;
  refillPerSecond: number;
}

/**
 * The scheduler proxy simulator as its own process (`schedflow sim`), so the daemon can be
 * killed without it and it can be stopped and restarted on the same port and state.
 */
export class SimUpstream implements JobTable {
  private proc: Spawned | undefined;
  readonly url: string;

  private constructor(
    private readonly dir: string,
    private readonly port: number,
    private readonly rateLimit: RateLimit,
    /** More `schedflow sim` options (the benchmark's simulated runtime, a larger cluster). */
    private readonly extraArgs: string[] = [],
  ) {
    this.url = `http://127.0.0.1:${port}`;
  }

  static async start(dir: string, rateLimit: RateLimit, extraArgs: string[] = []): Promise<SimUpstream> {
    const tokens = join(dir, 'tokens.json');
    writeFileSync(
      tokens,
      JSON.stringify({
        [ALICE_TOKEN]: { user: 'alice', account: 'lab', scopes: ['sched:read', 'scheddb:read', 'sched:jobs:manage'] },
      }),
      { mode: 0o600 },
    );
    const sim = new SimUpstream(dir, await freePort(), rateLimit, extraArgs);
    await sim.startProcess();
    return sim;
  }

  private async startProcess(): Promise<void> {
    const args = [
      CLI,
      'sim',
      ...['--port', String(this.port), '--tokens', join(this.dir, 'tokens.json')],
      ...['--state-dir', join(this.dir, 'state'), '--cpus', '32', '--memory-mb', '65536'],
      // Cache lifetimes at the contract's minimum, so polling sees changes soon; jobs stay
      // listed for the whole run (MinJobAge), so the verdict can count them all.
      ...['--cache-ttl', '2', '--min-job-age', '3600', '--kill-wait', '1'],
      ...['--rate-capacity', String(this.rateLimit.capacity), '--rate-refill', String(this.rateLimit.refillPerSecond)],
      ...['--no-munge', '--log-level', 'warn'],
      ...this.extraArgs,
    ];
    this.proc = spawnTracked(process.execPath, args, { cwd: this.dir, stdio: ['ignore', 'ignore', 'ignore'] });
    const up = await pollUntil(
      async () => ((await this.admin('GET', '/ping')).status < 500 ? true : undefined),
      20_000,
      100,
    );
    if (!up) throw new Error('the simulator did not start within 20 s');
  }

  /** SIGTERM (a restart, not a crash: its jobs end as a stopped slurmd's would) and waits. */
  async stop(): Promise<void> {
    const proc = this.proc;
    if (!proc?.alive()) return;
    proc.child.kill('SIGTERM');
    const exited = await Promise.race([proc.exited, new Promise((r) => setTimeout(r, 10_000))]);
    if (!exited) proc.child.kill('SIGKILL');
    await proc.exited;
  }

  async restart(): Promise<void> {
    await this.stop();
    await this.startProcess();
  }

  /** Switches the simulated slurmctld and slurmdbd behind the proxy on and off. */
  async setUpstream(state: { slurmctld?: 'up' | 'down'; slurmdbd?: 'up' | 'down' }): Promise<void> {
    const answer = await this.admin('PUT', '/_sim/upstream', state);
    if (answer.status !== 200) throw new Error(`PUT /_sim/upstream answered ${answer.status}`);
  }

  /** Every job the simulator holds (a file read: no request that would spend the daemon's rate budget). */
  async jobs(): Promise<SimJob[]> {
    try {
      const state = JSON.parse(readFileSync(join(this.dir, 'state', 'jobs.json'), 'utf8')) as { jobs: SimJob[] };
      return state.jobs;
    } catch {
      return [];
    }
  }

  /**
   * A request to the simulator itself, not through the counting proxy, from 127.0.0.2: the
   * proxy's rate limit is per client address, so these never take the daemon's tokens.
   */
  private admin(method: string, path: string, body?: unknown): Promise<{ status: number }> {
    return new Promise((resolve, reject) => {
      const text = body === undefined ? undefined : JSON.stringify(body);
      const req = request(
        {
          host: '127.0.0.1',
          port: this.port,
          localAddress: '127.0.0.2',
          method,
          path,
          headers: {
            ...(text && { 'content-type': 'application/json', 'content-length': Buffer.byteLength(text) }),
            // The simulator made its admin token in its state dir at start (its /ping needs none).
            ...(path.startsWith('/_sim/') && {
              authorization: `Bearer ${readFileSync(join(this.dir, 'state', ADMIN_TOKEN_FILE), 'utf8').trim()}`,
            }),
          },
        },
        (res) => {
          res.resume();
          res.on('end', () => resolve({ status: res.statusCode ?? 0 }));
        },
      );
      req.on('error', reject);
      req.setTimeout(5000, () => req.destroy(new Error('timeout')));
      req.end(text);
    });
  }
}
