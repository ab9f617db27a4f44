import { readFileSync } from 'node:fs';
import { BaseSequencer, type TestSpecification } from 'vitest/node';
import { type FileFigures, fileKey } from './file-figures.js';

/**
 * Vitest's order, longest file first, on a first run too, with the files that need most CPU
 * spread among the others. Vitest knows a file's duration only from its own cache of earlier
 * runs (node_modules/.vite), which a fresh clone, CI's, lacks; it then runs the largest files
 * first. The files that wait longest are small ones (a daemon killed and started again, a
 * registration left to lapse: 180 lines, 90 s), so they started last and ran on alone at the
 * end of a first run. `test/durations.json` holds the durations a run measured (`npm run
 * test:durations` writes it from the cache); vitest's own, when it has one, comes first, and a
 * file in neither (a new one) is run first, as vitest does.
 *
 * The suite is CPU-bound on 2 cores for most of a run (vmstat: 100 % busy). The files that start
 * processes (daemons, CLIs, a browser) need up to a core each; longest first, five or six of
 * them started together and each took two to three times its time alone, while the files that
 * mostly wait ran on at the end with a core idle (90 s at about 65 % busy). So a file of more
 * than HEAVY_CPU_SEC of CPU that is more than HEAVY_CPU_SHARE of its duration (test/
 * durations.json's `cpu`, from file-cpu.ts) is started one for every two others, each kind
 * longest first; so is a file not in test/durations.json yet, unless it is a unit test. The
 * machine's speed varies much from run to run: on one afternoon, five runs in the plain order
 * took 246–298 s, two in this one 244 and 248 s.
 */
export default class LongestFirst extends BaseSequencer {
  override async sort(files: TestSpecification[]): Promise<TestSpecification[]> {
    const committed = readCommitted();
    const weight = (spec: TestSpecification) => {
      const key = keyOf(this.ctx.config.root, spec);
      const cached = this.ctx.cache.getFileTestResults(key);
      if (cached?.failed) return Number.POSITIVE_INFINITY;
      return cached?.duration ?? committed.get(key)?.ms ?? Number.POSITIVE_INFINITY;
    };
    const heavy = new Set(
      files.filter((spec) => {
        const figures = committed.get(keyOf(this.ctx.config.root, spec));
        // A file not in test/durations.json yet is taken for one that starts processes: 70 new
        // files, run first among the others, started together and took CI's 2 cores for
        // minutes (UI tests past their 60 s there, 15 s in the same suite otherwise).
        if (!figures) return spec.project.name !== 'unit';
        const cpuSec = figures.cpuSec ?? 0;
        return cpuSec > HEAVY_CPU_SEC && cpuSec * 1000 > HEAVY_CPU_SHARE * figures.ms;
      }),
    );
    // From vitest's own order, so files known to neither keep it (a stable sort).
    const ordered = await super.sort(files);
    const weights = new Map(ordered.map((spec) => [spec, weight(spec)]));
    ordered.sort((a, b) => heavierFirst(weights.get(a) ?? 0, weights.get(b) ?? 0));
    return interleave(
      ordered.filter((spec) => heavy.has(spec)),
      ordered.filter((spec) => !heavy.has(spec)),
      OTHERS_PER_HEAVY,
    );
  }
}

/**
 * A file over both (its CPU, and its CPU against its duration in a whole run) is started among
 * others rather than with its peers: the files that start processes. A long file that mostly
 * waits (arrays, attempts: 12 s of 50–65 s) is one of the others.
 */
const HEAVY_CPU_SEC = 10;
const HEAVY_CPU_SHARE = 0.25;
const OTHERS_PER_HEAVY = 2;

/** One of `heavy`, then `per` of `others`, in turn, each list's order kept. */
function interleave<T>(heavy: T[], others: T[], per: number): T[] {
  const out: T[] = [];
  for (let h = 0, o = 0; h < heavy.length || o < others.length; ) {
    if (h < heavy.length) out.push(heavy[h++] as T);
    for (let i = 0; i < per && o < others.length; i++) out.push(others[o++] as T);
  }
  return out;
}

/** Descending; equal weights (unknown files are all infinite) keep their order. */
function heavierFirst(a: number, b: number): number {
  if (a === b) return 0;
  return b > a ? 1 : -1;
}

function keyOf(root: string, spec: Pick<TestSpecification, 'moduleId' | 'project'>): string {
  return fileKey(root, spec.project.name, spec.moduleId);
}

export const DURATIONS_FILE = new URL('../durations.json', import.meta.url);

/** A file's committed figures, as the sort uses them. */
interface Committed {
  ms: number;
  cpuSec: number | undefined;
}

function readCommitted(): Map<string, Committed> {
  try {
    const files = JSON.parse(readFileSync(DURATIONS_FILE, 'utf8')) as Record<string, Partial<FileFigures> | null>;
    const known = new Map<string, Committed>();
    for (const [key, figures] of Object.entries(files)) {
      const seconds = figures?.seconds;
      // A value that is not a number would make the order depend on the sort's inner workings.
      if (seconds === undefined || !Number.isFinite(seconds)) continue;
      const cpu = figures?.cpu;
      known.set(key, { ms: seconds * 1000, cpuSec: cpu !== undefined && Number.isFinite(cpu) ? cpu : undefined });
    }
    return known;
  } catch {
    return new Map();
  }
}
