import { constants } from 'node:os';
import type { Logger } from './logger.js';

export interface StepOptions {
  /**
   * How long the step may take; past it, it is logged and skipped, and the next step runs.
   * @defaultValue the lifecycle's `stepTimeoutMs`
   */
  timeoutMs?: number;
}

interface Step {
  name: string;
  stop: () => Promise<void>;
  timeoutMs: number;
}

/** Thrown by `add()` once a stop has been asked for: a start under way goes no further. */
export class StopRequestedError extends Error {
  override name = 'StopRequestedError';
  constructor() {
    super('stopped while starting');
  }
}

export interface LifecycleOptions {
  /** @defaultValue 5000 */
  stepTimeoutMs?: number;
  /** How long a stop waits for a start under way to reach its next step. @defaultValue 5000 */
  startWaitMs?: number;
}

/**
 * Named shutdown steps, run in reverse start order, each under its own time limit: a step
 * that hangs is logged and skipped, and those after it (closing Redis and SQLite) still run.
 * A second signal forces the exit. `stop()` returns one cached promise.
 */
export class Lifecycle {
  private readonly steps: Step[] = [];
  private stopping: Promise<void> | undefined;
  private starting: Promise<unknown> | undefined;
  private readonly stepTimeoutMs: number;
  private readonly startWaitMs: number;

  constructor(
    private readonly logger: Logger,
    options: LifecycleOptions = {},
  ) {
    this.stepTimeoutMs = options.stepTimeoutMs ?? 5000;
    this.startWaitMs = options.startWaitMs ?? 5000;
  }

  /**
   * Registers what undoes a start; call right after the thing has started. Once a stop has
   * been asked for (a signal during the start), the step is still registered, so it is
   * undone, and StopRequestedError ends the start there.
   */
  add(name: string, stop: () => Promise<void>, options: StepOptions = {}): void {
    this.steps.push({ name, stop, timeoutMs: options.timeoutMs ?? this.stepTimeoutMs });
    if (this.stopping) throw new StopRequestedError();
  }

  /** The start under way: a stop lets it reach its next step before undoing what it made. */
  track<T>(start: Promise<T>): Promise<T> {
    this.starting = start;
    return start;
  }

  /**
   * The longest a stop may take as registered now: a start under way reaching its next step,
   * then every step hanging until its own limit. What a service manager's stop timeout
   * (systemd's TimeoutStopSec) must exceed, or it kills the daemon with its shutdown unfinished.
   */
  get worstCaseStopMs(): number {
    return this.steps.reduce((total, step) => total + step.timeoutMs, this.startWaitMs);
  }

  get stopRequested(): boolean {
    return this.stopping !== undefined;
  }

  stop(): Promise<void> {
    this.stopping ??= this.runSteps();
    return this.stopping;
  }

  private async runSteps(): Promise<void> {
    const startedAt = Date.now();
    // Let a start under way reach its next add() (which ends it), so what it is starting
    // now is registered and undone too; a start that hangs is not waited for beyond the limit.
    await this.within(this.starting ?? Promise.resolve(), this.startWaitMs, 'start');
    // Popped one by one: a step a late start registers meanwhile is still run.
    for (let step = this.steps.pop(); step; step = this.steps.pop()) {
      const stepStartedAt = Date.now();
      const outcome = await this.within(step.stop(), step.timeoutMs, step.name);
      if (outcome === 'done')
        this.logger.info({ step: step.name, ms: Date.now() - stepStartedAt }, 'shutdown step done');
    }
    this.logger.info({ ms: Date.now() - startedAt }, 'shutdown complete');
  }

  /** Waits for `work` up to `timeoutMs`; a failure or the timeout is logged, never thrown. */
  private async within(work: Promise<unknown>, timeoutMs: number, step: string): Promise<'done' | 'failed'> {
    let timer: NodeJS.Timeout | undefined;
    const timeout = new Promise<'timeout'>((resolve) => {
      timer = setTimeout(() => resolve('timeout'), timeoutMs);
    });
    try {
      const result = await Promise.race([work.then(() => 'done' as const), timeout]);
      if (result === 'timeout') {
        this.logger.error({ step, timeoutMs }, 'shutdown step timed out; going on with the next');
        return 'failed';
      }
      return 'done';
    } catch (error) {
      // A start that failed has its own error path; only a failed stop is the shutdown's to report.
      if (step !== 'start') this.logger.error({ step, err: error }, 'shutdown step failed');
      return 'failed';
    } finally {
      clearTimeout(timer);
    }
  }

  /**
   * Stops on SIGINT/SIGTERM and exits with 128 + signal number; a second signal exits at once.
   * A promise rejected with no handler, or an exception nothing caught, is a bug: it is logged
   * with its stack and the daemon stops (exit 1), rather than going on in a state nobody planned
   * for. Install before the start, so a signal or a crash during the start stops what has started.
   */
  handleProcessEvents(): void {
    for (const signal of ['SIGINT', 'SIGTERM'] as const) {
      process.on(signal, () => {
        const code = 128 + (constants.signals[signal] ?? 0);
        if (this.stopping) {
          this.logger.warn({ signal }, 'second signal: exiting now, without finishing the shutdown');
          process.exit(code);
        }
        this.logger.info({ signal }, 'shutting down');
        void this.stop().finally(() => process.exit(code));
      });
    }
    const crashed = (what: string) => (reason: unknown) => {
      // pino's `err` serializer writes the stack; a thrown non-Error is wrapped once to get one.
      this.logger.error(
        { err: reason instanceof Error ? reason : new Error(String(reason), { cause: reason }) },
        `${what}; shutting down`,
      );
      // 1: schedflow's exit code for an internal error (EXIT.internal).
      void this.stop().finally(() => process.exit(1));
    };
    process.on('unhandledRejection', crashed('unhandled promise rejection'));
    // Listening replaces Node's default (print and exit at once): the steps still close Redis and SQLite.
    process.on('uncaughtException', crashed('uncaught exception'));
  }
}
