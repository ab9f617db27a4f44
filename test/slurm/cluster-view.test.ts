import { randomUUID } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createLogger } from '../../src/logger.js';
import { RedisClusterCache } from '../../src/redis/cluster-cache.js';
import { SchedClient } from '../../src/sched/client.js';
import { joinNodes, joinPartitions, queueOf } from '../../src/sched/cluster-reads.js';
import { ClusterView } from '../../src/sched/cluster-view.js';
import { jobSpecSchema } from '../../src/sched/job-spec.js';
import { SUPPORTED_VERSIONS } from '../../src/sched/versions.js';
import { runCli } from '../helpers/cli-process.js';
import { waitFor } from '../helpers/http.js';
import { startTestRedis, type TestRedis } from '../helpers/redis.js';
import { jobWorkDir, realSlurm, script, slurmCommand, slurmrestdProfile } from './cluster.js';

/**
 * Issue 34's cluster view on the real Slurm 25.11.7 through plain slurmrestd, in each data
 * parser: partitions (debug, and lab-owner for account lab only), the node with a job of ours
 * on it, a maintenance reservation made for the test with scontrol (deleted after), and the
 * queue with that job; then through the cached view (Redis) and `schedflow sched`.
 */

const logger = createLogger({ level: process.env.LOG_LEVEL ?? 'silent' });
const dir = mkdtempSync(join(tmpdir(), 'schedflow-slurm-cluster-'));
const RESERVATION = `sf-cv-${process.pid}`;
let redis: TestRedis;

const connect = (version: (typeof SUPPORTED_VERSIONS)[number]) =>
  SchedClient.connect(slurmrestdProfile(join(dir, `alice-${version}`), { version }).profile, { logger });

beforeAll(async () => {
  redis = await startTestRedis();
  await slurmCommand('scontrol', [
    'create',
    'reservation',
    `ReservationName=${RESERVATION}`,
    'StartTime=now+2hours',
    'Duration=15',
    'Nodes=localhost',
    'Users=alice',
    'Flags=MAINT',
  ]);
}, 60_000);

afterAll(async () => {
  await slurmCommand('scontrol', ['delete', `ReservationName=${RESERVATION}`]).catch(() => undefined);
  await redis?.stop();
});

/** A job of alice's, running, for the length of `body`; cancelled after. */
async function withRunningJob(client: SchedClient, body: (jobId: number) => Promise<void>): Promise<void> {
  const spec = jobSpecSchema.parse({
    name: 'sf-cluster-view',
    script: script('sleep 60'),
    current_working_directory: jobWorkDir(),
    time_limit: 2,
    cpus_per_task: 1,
  });
  const { job_id: jobId } = await client.submit(spec, randomUUID());
  try {
    await waitFor(async () => ((await client.getJob(jobId)).data.state === 'RUNNING' ? true : undefined), {
      what: `job ${jobId} running`,
      timeoutMs: 60_000,
      intervalMs: 500,
    });
    await body(jobId);
  } finally {
    await client.cancel(jobId).catch(() => undefined);
  }
}

describe.each(SUPPORTED_VERSIONS)('the cluster on real slurmrestd, %s', (version) => {
  it('reads partitions, nodes, reservations and the queue', { timeout: 120_000 }, async () => {
    const client = await connect(version);
    try {
      await withRunningJob(client, async (jobId) => {
        const [partitions, nodes, reservations, jobs] = await Promise.all([
          client.listPartitions(),
          client.listNodes(),
          client.listReservations(),
          client.listJobs(),
        ]);
        const byName = new Map(joinPartitions(partitions.data, nodes.data, jobs.data.jobs).map((p) => [p.name, p]));
        expect(byName.get('debug')).toMatchObject({
          state: 'UP',
          nodeList: 'localhost',
          limits: { maxTime: 'infinite' },
          access: { allowedAccounts: [] },
        });
        expect(byName.get('lab-owner')?.access.allowedAccounts).toEqual(['lab']);
        const debug = byName.get('debug');
        expect(debug?.cpus.total).toBe(2);
        expect(debug?.cpus.allocated).toBeGreaterThanOrEqual(1);
        expect(debug?.jobs.running).toBeGreaterThanOrEqual(1);

        const [node] = joinNodes(nodes.data, jobs.data.jobs).filter((n) => n.name === 'localhost');
        expect(node).toMatchObject({ cpus: 2, partitions: expect.arrayContaining(['debug', 'lab-owner']) });
        expect(node?.jobIds).toContain(jobId);
        expect(node?.allocatedCpus).toBeGreaterThanOrEqual(1);
        expect(['MIXED', 'ALLOCATED']).toContain(node?.state);

        expect(reservations.data.find((r) => r.name === RESERVATION)).toMatchObject({
          nodeList: 'localhost',
          users: ['alice'],
          flags: expect.arrayContaining(['MAINT']),
        });

        const queue = queueOf(jobs.data.jobs, jobs.data.lastUpdate);
        expect(queue.jobs.find((j) => j.job_id === jobId)).toMatchObject({ state: 'RUNNING', user: 'alice' });
        expect(queue.jobs.every((j) => ['PENDING', 'RUNNING', 'SUSPENDED', 'UNKNOWN'].includes(j.state))).toBe(true);
      });
    } finally {
      await client.close();
    }
  });
});

describe('the cached view and the CLI on real slurmrestd', () => {
  it('one read per listing serves many viewers; schedflow sched prints the tables', { timeout: 120_000 }, async () => {
    const client = await connect('v0.0.44');
    const connection = new Redis(redis.url, { maxRetriesPerRequest: 1 });
    try {
      let reads = 0;
      const counting = new Proxy(client, {
        get(target, prop, receiver) {
          const value = Reflect.get(target, prop, receiver);
          if (typeof value !== 'function') return value;
          return (...args: unknown[]) => {
            if (typeof prop === 'string' && prop.startsWith('list')) reads++;
            return (value as (...a: unknown[]) => unknown).apply(target, args);
          };
        },
      });
      const view = new ClusterView({
        cache: new RedisClusterCache(connection),
        prefix: `sf-cv-${process.pid}`,
        clientFor: () => counting,
        ttlMs: 60_000,
        logger,
      });
      const answers = await Promise.all(
        Array.from({ length: 20 }, () =>
          Promise.all([
            view.view('real', 'partitions'),
            view.view('real', 'nodes'),
            view.view('real', 'reservations'),
            view.view('real', 'queue'),
          ]),
        ),
      );
      // partitions, nodes, reservations, jobs: one read each for 80 views.
      expect(reads).toBe(4);
      const [partitions, , reservations] = answers[0] ?? [];
      expect(partitions?.stale).toBe(false);
      expect((partitions?.data ?? []).map((p) => p.name)).toEqual(expect.arrayContaining(['debug', 'lab-owner']));
      expect((reservations?.data ?? []).map((r) => r.name)).toContain(RESERVATION);
    } finally {
      connection.disconnect();
      await client.close();
    }

    const { input } = slurmrestdProfile(join(dir, 'cli'));
    const flags = [
      '--url',
      realSlurm().url,
      '--flavor',
      'slurmrestd',
      '--auth',
      'header-pair',
      '--user',
      'alice',
      '--token-file',
      (input.auth as { tokenFile: string }).tokenFile,
    ];
    const sched = (args: string[]) => runCli(['sched', ...flags, ...args], { cwd: dir, timeoutMs: 60_000 });
    const partitions = await sched(['partitions']);
    expect(partitions.stderr).toBe('');
    expect(partitions.stdout).toMatch(/^PARTITION\s+STATE\s+NODES\s+CPUS\(A\/I\/O\/T\)/);
    expect(partitions.stdout).toMatch(/\nlab-owner\s+UP\s+1 \(localhost\).*\blab\b/);
    const nodes = await sched(['nodes']);
    expect(nodes.stdout).toMatch(/\nlocalhost\s+\S+\s+\d\/2\s/);
    const reservations = await sched(['--json', 'reservations']);
    const parsed = JSON.parse(reservations.stdout) as { reservations: { name: string }[] };
    expect(parsed.reservations.map((r) => r.name)).toContain(RESERVATION);
    const queue = await sched(['queue']);
    expect(queue.code).toBe(0);
    expect(queue.stdout).toMatch(/JOBID|the queue is empty/);
  });
});
