/** What became of one step of a run being cancelled. */
export interface StepCancel {
  step: string;
  requestId: string;
  /**
   * `withdrawn`: never submitted, now cancelled here; `cancel_sent`: the scheduler was asked to
   * cancel its job (the next poll records CANCELLED); `submitting`: being submitted right now, its
   * cancel follows once it is (each pipeline tick tries again); `error`: the scheduler did not take
   * the cancel (`detail`), tried again at the next tick.
   */
  outcome: 'withdrawn' | 'cancel_sent' | 'submitting' | 'error';
  detail: string | null;
}

/**
 * The cancels one run engine has sent and not yet seen end, so that its next pipeline tick does
 * not send them again. Each engine has its own (made with it in the composition root, and so in
 * each test's daemon), not a module's: a second engine in one process must neither skip a cancel
 * because another sent it nor inherit another's passes.
 *
 * Kept in memory rather than derived from the history on purpose: they only spare the scheduler
 * an idempotent call (a second cancel of a job gets "already done", a pass joined is a pass not
 * repeated). Another host, or this one after a restart, sending a cancel again is harmless, while
 * recording each in the history would cost a write per step per cancel. What must outlast a
 * restart (that a run is being cancelled, and by whom) is in the history: pipeline_runs.cancel_requested_at.
 */
export class CancelsInFlight {
  /** Steps waiting on a dependency that can never be met, whose job's cancel was sent. */
  readonly blocked = new Set<string>();
  /** Steps of runs being cancelled whose cancel the scheduler took (the poll records CANCELLED). */
  readonly sent = new Set<string>();
  /** The pass over a run's steps under way, by run id: a second asker gets its outcomes. */
  readonly passes = new Map<string, Promise<StepCancel[]>>();
}
