import type { ApiVersion } from '../../src/sched/versions.js';
import type { StepRecord } from './reduce.js';
import { compareShapes } from './shape.js';

/** One way the target's answer differs from the recorded one. */
export interface Divergence {
  version: ApiVersion;
  step: string;
  request: string;
  /** Which part of the record: `status`, `errors`, `jobs.failed.state`, `body.jobs[].exit_code`… */
  where: string;
  expected: string;
  actual: string;
}

const show = (value: unknown): string => (value === undefined ? 'absent' : JSON.stringify(value));

/**
 * Compares the records of one version step by step. The body's shape is compared member by
 * member, so a report names the exact member that is missing or has another type.
 */
export function compareRecords(version: ApiVersion, expected: StepRecord[], actual: StepRecord[]): Divergence[] {
  const found: Divergence[] = [];
  const byStep = new Map(actual.map((r) => [r.step, r]));
  for (const want of expected) {
    const got = byStep.get(want.step);
    const at = (where: string, e: unknown, a: unknown) =>
      found.push({ version, step: want.step, request: want.request, where, expected: show(e), actual: show(a) });
    if (!got) {
      at('(step)', 'recorded', undefined);
      continue;
    }
    for (const field of [
      'request',
      'status',
      'contentType',
      'text',
      'plugin',
      'errors',
      'warnings',
      'signal',
    ] as const) {
      if (show(want[field]) !== show(got[field])) at(field, want[field], got[field]);
    }
    const roles = [...new Set([...Object.keys(want.jobs ?? {}), ...Object.keys(got.jobs ?? {})])];
    for (const role of roles) {
      const w = (want.jobs as Record<string, Record<string, unknown>> | undefined)?.[role];
      const g = (got.jobs as Record<string, Record<string, unknown>> | undefined)?.[role];
      if (!w || !g) {
        at(`jobs.${role}`, w, g);
        continue;
      }
      for (const member of new Set([...Object.keys(w), ...Object.keys(g)])) {
        if (show(w[member]) !== show(g[member])) at(`jobs.${role}.${member}`, w[member], g[member]);
      }
    }
    for (const d of compareShapes(want.body, got.body)) {
      found.push({
        version,
        step: want.step,
        request: want.request,
        where: `body.${d.path}`,
        expected: d.expected,
        actual: d.actual,
      });
    }
  }
  for (const extra of actual.filter((r) => !expected.some((e) => e.step === r.step))) {
    found.push({
      version,
      step: extra.step,
      request: extra.request,
      where: '(step)',
      expected: 'absent',
      actual: 'recorded',
    });
  }
  return found;
}

/** One line per divergence, in step order, for a test failure: endpoint, version, step, member. */
export function formatDivergences(
  divergences: Divergence[],
  sides: { expected: string; actual: string } = { expected: 'real', actual: 'simulator' },
): string {
  return divergences
    .map(
      (d) =>
        `${d.version} ${d.request} [${d.step}] ${d.where}: ${sides.expected} ${d.expected}, ${sides.actual} ${d.actual}`,
    )
    .join('\n');
}
