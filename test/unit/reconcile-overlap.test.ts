import { expect, it } from 'vitest';
import { RECOVERY_OVERLAP_SEC, ReconcileOverlap, STEADY_OVERLAP_SEC } from '../../workers/reconcile.js';

it('looks ten minutes back on the first run and for ten minutes after a failure, a minute otherwise', () => {
  const overlap = new ReconcileOverlap();
  const t0 = 1_000_000;
  expect(overlap.forRun('a', t0)).toBe(RECOVERY_OVERLAP_SEC);
  expect(overlap.forRun('a', t0 + 60_000)).toBe(STEADY_OVERLAP_SEC);
  // Profiles are apart: another's first run is its own.
  expect(overlap.forRun('b', t0 + 60_000)).toBe(RECOVERY_OVERLAP_SEC);
  overlap.failed('a', t0 + 120_000);
  expect(overlap.forRun('a', t0 + 180_000)).toBe(RECOVERY_OVERLAP_SEC);
  expect(overlap.forRun('a', t0 + 120_000 + RECOVERY_OVERLAP_SEC * 1000 - 1)).toBe(RECOVERY_OVERLAP_SEC);
  expect(overlap.forRun('a', t0 + 120_000 + RECOVERY_OVERLAP_SEC * 1000)).toBe(STEADY_OVERLAP_SEC);
  expect(overlap.forRun('b', t0 + 120_000)).toBe(STEADY_OVERLAP_SEC);
});
