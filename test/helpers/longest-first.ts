import { readFileSync } from 'node:fs';
import { relative } from 'node:path';
import { BaseSequencer, type TestSpecification } from 'vitest/node';

/**
 * Vitest's order, longest file first, on a first run too. Vitest knows a file's duration only
 * from its own cache of earlier runs (node_modules/.vite), which a fresh clone, CI's, lacks;
 * it then runs the largest files first. The files that wait longest are small ones (a daemon
 * killed and started again, a registration left to lapse: 180 lines, 90 s), so they started
 * last and ran on alone at the end of a first run. `test/durations.json` holds the durations a
 * run measured (`npm run test:durations` writes it from the cache); vitest's own, when it has
 * one, comes first, and a file in neither (a new one) is run first, as vitest does.
 */
export default class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const committed = readCommitted();
    const weight = (spec: TestSpecification) => {
      const key = keyOf(this.ctx.config.root, spec);
      const cached = this.ctx.cache.getFileTestResults(key);
      if (cached?.failed) return Number.POSITIVE_INFINITY;
      return cached?.duration ?? committed.get(key) ?? Number.POSITIVE_INFINITY;
    };
    // From vitest's own order, so files known to neither keep it (a stable sort).
    const ordered = await super.sort(files);
    const weights = new Map(ordered.map((spec) => [spec, weight(spec)]));
    return ordered.sort((a, b) => heavierFirst(weights.get(a) ?? 0, weights.get(b) ?? 0));
  }
}

/** Descending; equal weights (unknown files are all infinite) keep their order. */
function heavierFirst(a: number, b: number): number {
  if (a === b) return 0;
  return b > a ? 1 : -1;
}

/** Vitest's key for a file's results: `<project>:<path from the root>`. */
export function keyOf(root: string, spec: Pick<TestSpecification, 'moduleId' | 'project'>): string {
  return `${spec.project.name}:${relative(root, spec.moduleId)}`;
}

export const DURATIONS_FILE = new URL('../durations.json', import.meta.url);

function readCommitted(): Map<string, number> {
  try {
    const seconds = JSON.parse(readFileSync(DURATIONS_FILE, 'utf8')) as Record<string, unknown>;
    // A value that is not a number would make the order depend on the sort's inner workings.
    const known = Object.entries(seconds).filter((entry): entry is [string, number] => Number.isFinite(entry[1]));
    return new Map(known.map(([key, s]) => [key, s * 1000]));
  } catch {
    return new Map();
  }
}
