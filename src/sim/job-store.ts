import { readFileSync, renameSync } from 'node:fs';
import { mkdir } from 'node:fs/promises';
import { join } from 'node:path';
import { z } from 'zod';
import { ConfigError } from '../errors.js';
import { writeOwnerOnlyFile } from '../lib/owner-only.js';
import { takePidLock } from '../lib/pid-lock.js';
import type { SimJob } from './sim-job.js';

const simJobSchema = z.object({
  jobId: z.number().int(),
  name: z.string(),
  user: z.string(),
  userId: z.number().int(),
  account: z.string(),
  partition: z.string(),
  comment: z.string(),
  script: z.string(),
  environment: z.array(z.string()),
  cwd: z.string(),
  tasks: z.number().int(),
  cpusPerTask: z.number().int(),
  memoryPerNodeMb: z.number().nullable(),
  timeLimitMin: z.number().nullable(),
  dependency: z.string(),
  standardOutput: z.string(),
  standardError: z.string(),
  state: z.enum(['PENDING', 'RUNNING', 'COMPLETED', 'FAILED', 'TIMEOUT', 'CANCELLED', 'NODE_FAIL', 'OUT_OF_MEMORY']),
  reason: z.string(),
  submitTime: z.number(),
  eligibleTime: z.number(),
  startTime: z.number(),
  endTime: z.number(),
  exitCode: z.number().nullable(),
  termSignal: z.number().nullable(),
  cpuUserSec: z.number(),
  cpuSystemSec: z.number(),
  // Absent from state files written before it was measured.
  peakMemoryBytes: z.number().nullable().default(null),
  unplaceable: z.boolean().optional(),
  completing: z.boolean().optional(),
  arrayJobId: z.number().int().optional(),
  arrayTaskId: z.number().int().optional(),
  arrayPending: z.array(z.number().int()).optional(),
  arrayThrottle: z.number().int().optional(),
  nodes: z.string(),
  lastUpdate: z.number(),
  pid: z.number().optional(),
  pidStartTicks: z.number().optional(),
});

const stateFileSchema = z.object({
  version: z.literal(1),
  nextJobId: z.number().int(),
  jobs: z.array(simJobSchema),
});

/** Another simulator holds the state folder: choose another, or stop that one. */
export class StateDirLockedError extends ConfigError {}

export interface SimState {
  nextJobId: number;
  jobs: SimJob[];
}

/**
 * The simulated cluster's job table on disk, so a restarted simulator remembers
 * its jobs (as slurmctld's StateSaveLocation and slurmdbd's database do).
 * Writes go to a temporary file and are renamed, so a crash never leaves half a file.
 */
export class JobStore {
  readonly file: string;
  private pending: NodeJS.Timeout | undefined;
  private lock: { release(): void } | undefined;
  /** How long the last write took: a table of 100,000 jobs takes about a second to write. */
  private lastSaveMs = 0;

  constructor(readonly stateDir: string) {
    this.file = join(stateDir, 'jobs.json');
  }

  /**
   * Creates the state dir and takes its lock: two simulators on one state dir
   * would each take the other's running jobs for orphans and kill them.
   */
  async init(): Promise<void> {
    await mkdir(this.stateDir, { recursive: true, mode: 0o700 });
    const lock = takePidLock(join(this.stateDir, 'sim.pid'));
    if (!lock.held) {
      throw new StateDirLockedError(
        `state dir ${this.stateDir} is in use by another simulator (pid ${lock.holder}); stop it or choose another --state-dir`,
      );
    }
    this.lock = lock;
  }

  release(): void {
    this.lock?.release();
    this.lock = undefined;
  }

  load(): SimState | undefined {
    let text: string;
    try {
      text = readFileSync(this.file, 'utf8');
    } catch (error) {
      if ((error as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
      throw error;
    }
    const parsed = stateFileSchema.safeParse(JSON.parse(text));
    if (!parsed.success) {
      throw new Error(`simulator state file ${this.file} is not valid: ${parsed.error.message}`);
    }
    return { nextJobId: parsed.data.nextJobId, jobs: parsed.data.jobs };
  }

  saveNow(state: SimState): void {
    if (this.pending) {
      clearTimeout(this.pending);
      this.pending = undefined;
    }
    const tmp = `${this.file}.tmp`;
    // Jobs' scripts and environments: for the owner only (the embedded simulator's state is in the data dir).
    const started = Date.now();
    writeOwnerOnlyFile(tmp, JSON.stringify({ version: 1, ...state }));
    renameSync(tmp, this.file);
    this.lastSaveMs = Date.now() - started;
  }

  /**
   * Coalesces bursts of changes into one write, at least four times as long after the change as
   * the last write took: a large table (a benchmark's) is not rewritten back to back while its
   * jobs change, which left no time to answer requests.
   */
  saveSoon(snapshot: () => SimState, onError: (error: unknown) => void, delayMs = 50): void {
    if (this.pending) return;
    this.pending = setTimeout(
      () => {
        this.pending = undefined;
        try {
          this.saveNow(snapshot());
        } catch (error) {
          onError(error);
        }
      },
      Math.max(delayMs, 4 * this.lastSaveMs),
    );
  }
}
