import { constants } from 'node:os';
import type { Logger } from './logger.js';

interface Step {
  name: string;
  stop: () => Promise<void>;
}

/**
 * Named shutdown steps, run in reverse start order under one deadline. A second
 * signal forces the exit. `stop()` returns one cached promise.
 */
export class Lifecycle {
  private readonly steps: Step[] = [];
  private stopping: Promise<void> | undefined;

  constructor(
    private readonly logger: Logger,
    /** @defaultValue 30000 */
    private readonly deadlineMs = 30_000,
  ) {}

  /** Registers what undoes a start; call right after the thing has started. */
  add(name: string, stop: () => Promise<void>): void {
    this.steps.push({ name, stop });
  }

  stop(): Promise<void> {
    this.stopping ??= this.runSteps();
    return this.stopping;
  }

  private async runSteps(): Promise<void> {
    const deadline = new Promise<'timeout'>((resolve) => {
      const timer = setTimeout(() => resolve('timeout'), this.deadlineMs);
      timer.unref();
    });
    for (const step of [...this.steps].reverse()) {
      try {
        const result = await Promise.race([step.stop().then(() => 'done' as const), deadline]);
        if (result === 'timeout') {
          this.logger.error({ step: step.name }, 'shutdown deadline passed; skipping the remaining steps');
          return;
        }
        this.logger.debug({ step: step.name }, 'stopped');
      } catch (error) {
        this.logger.error({ step: step.name, err: error }, 'shutdown step failed');
      }
    }
  }

  /** Stops on SIGINT/SIGTERM and exits with 128 + signal number; a second signal exits at once. */
  handleSignals(): void {
    for (const signal of ['SIGINT', 'SIGTERM'] as const) {
      process.on(signal, () => {
        const code = 128 + (constants.signals[signal] ?? 0);
        if (this.stopping) {
          this.logger.warn({ signal }, 'second signal: exiting now');
          process.exit(code);
        }
        this.logger.info({ signal }, 'shutting down');
        void this.stop().finally(() => process.exit(code));
      });
    }
  }
}
