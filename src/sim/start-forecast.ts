/**
 * The scheduler's forecast of pending jobs' starts, as slurmctld's backfill makes it and sends it
 * as a pending job's `start_time`: on a real Slurm 25.11.7, a job waiting for `Resources` on a
 * full node is given the end of the running job it waits for (its start + time limit, the
 * `end_time` slurmctld shows for it), and its own `end_time` is that start + its own limit. Each
 * waiting job, in the scheduler's order, is placed where its CPUs are free from then on, and
 * holds them for its time limit, so the next one is placed after it. A job behind one with no
 * time limit (infinite), or held, gets no forecast (0): none is known.
 */

/** CPUs freed (positive) or taken (negative) at a time (Unix seconds). */
interface Step {
  atSec: number;
  cpus: number;
}

export class StartForecast {
  private readonly steps: Step[] = [];

  /**
   * @param freeCpus CPUs free now.
   * @param running the CPUs of each running job and when it is expected to end (null: never).
   */
  constructor(
    private readonly nowSec: number,
    private readonly freeCpus: number,
    running: readonly { cpus: number; endSec: number | null }[],
  ) {
    for (const job of running) {
      if (job.endSec !== null) this.steps.push({ atSec: Math.max(nowSec, job.endSec), cpus: job.cpus });
    }
  }

  /**
   * The earliest time `cpus` are free from then on, taken for `durationSec` (null: for good);
   * 0 when they never are.
   */
  place(cpus: number, durationSec: number | null): number {
    const steps = [...this.steps].sort((a, b) => a.atSec - b.atSec);
    const times = [this.nowSec, ...new Set(steps.map((s) => s.atSec))].sort((a, b) => a - b);
    for (const at of times) {
      // Free at `at` and at every later step: a later reservation must not be overrun.
      let free = this.freeCpus;
      for (const step of steps) if (step.atSec <= at) free += step.cpus;
      let lowest = free;
      for (const step of steps) {
        if (step.atSec <= at) continue;
        free += step.cpus;
        lowest = Math.min(lowest, free);
      }
      if (lowest >= cpus) {
        this.steps.push({ atSec: at, cpus: -cpus });
        if (durationSec !== null) this.steps.push({ atSec: at + durationSec, cpus });
        return at;
      }
    }
    return 0;
  }
}
