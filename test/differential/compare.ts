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
 * How a cancelled script dies is a race on a real cluster: slurmstepd's SIGTERM, or the SIGKILL
 * after it, or the shell's own exit 143 (128 + TERM), from one run to the next (seen on 25.11.7).
 * Any of them is "ended by the cancel" here; a clean exit or another signal still differs. The
 * batch step's state follows the same race: CANCELLED when signalled, FAILED after the shell's
 * exit 143 (seen on 25.11.7 in a CI run).
 */
function settled(role: string, value: unknown): unknown {
  if (role !== 'cancelled') return value;
  const byCancel = (code: unknown): unknown => {
    const c = code as { status?: unknown; signal?: unknown; return_code?: unknown } | null;
    if (!c || typeof c !== 'object') return code;
    const signalled = JSON.stringify(c.status) === '["SIGNALED"]' && (c.signal === 'TERM' || c.signal === 'KILL');
    const shellExit = JSON.stringify(c.status) === '["ERROR"]' && c.return_code === 143;
    return signalled || shellExit ? 'ended by the cancel' : code;
  };
  if (Array.isArray(value)) {
    return value.map((step) => {
      if (!step || typeof step !== 'object' || !('exit_code' in step)) return step;
      const { exit_code, state } = step as { exit_code: unknown; state?: unknown };
      const ended = byCancel(exit_code);
      const byTheCancel =
        ended === 'ended by the cancel' && ['["CANCELLED"]', '["FAILED"]'].includes(JSON.stringify(state));
      return { ...step, exit_code: ended, ...(byTheCancel && { state: 'ended by the cancel' }) };
    });
  }
  return byCancel(value);
}

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
        const [want, got] = [settled(role, w[member]), settled(role, g[member])];
        if (show(want) !== show(got)) at(`jobs.${role}.${member}`, w[member], g[member]);
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
