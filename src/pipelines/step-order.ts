import type { StepNeed } from '../db/schema.js';

export type StepOrder = { ok: true; order: string[] } | { ok: false; cycle: string[] };

/**
 * Kahn's algorithm, round by round: each round takes every step whose needs
 * are all taken, in file order. Linear in steps and needs (an index for each
 * step's dependants and a count of its untaken needs) apart from sorting each
 * round, where the former version rescanned every remaining step per round
 * (quadratic: minutes for tens of thousands of steps). On a cycle, the steps
 * never taken: those on it and those behind it. `needs` naming no step are
 * ignored here (the loader reports them).
 */
export function stepOrder(steps: readonly string[], needs: Readonly<Record<string, readonly StepNeed[]>>): StepOrder {
  const position = new Map(steps.map((s, i) => [s, i]));
  const waitingFor = new Map<string, number>();
  const dependants = new Map<string, string[]>();
  for (const step of steps) {
    // A step that needs another twice still waits for it once.
    const needed = new Set((needs[step] ?? []).map((n) => n.step).filter((n) => position.has(n) && n !== step));
    waitingFor.set(step, needed.size);
    for (const n of needed) {
      const list = dependants.get(n);
      if (list) list.push(step);
      else dependants.set(n, [step]);
    }
  }
  const order: string[] = [];
  let round = steps.filter((s) => waitingFor.get(s) === 0);
  while (round.length > 0) {
    const next: string[] = [];
    for (const step of round) {
      order.push(step);
      for (const d of dependants.get(step) ?? []) {
        const left = (waitingFor.get(d) ?? 0) - 1;
        waitingFor.set(d, left);
        if (left === 0) next.push(d);
      }
    }
    round = next.sort((a, b) => (position.get(a) ?? 0) - (position.get(b) ?? 0));
  }
  if (order.length === steps.length) return { ok: true, order };
  const taken = new Set(order);
  return { ok: false, cycle: steps.filter((s) => !taken.has(s)) };
}
