import { appendFileSync, mkdirSync, readFileSync } from 'node:fs';
import { dirname } from 'node:path';
import { fileURLToPath } from 'node:url';
import { afterAll } from 'vitest';
import { CPU_LOG, fileKey } from './file-figures.js';

/**
 * Records the CPU a test file costs (its process's, and the processes it started and reaped:
 * daemons, CLIs, browsers) in `.tmp/test-cpu.jsonl`, a line per file, for `npm run
 * test:durations` to keep in test/durations.json beside the file's duration. The suite is
 * CPU-bound on 2 cores for most of a run, and the order of its files (longest-first.ts) spreads
 * the ones that need most of it. Loaded as a vitest setup file: it runs before each file.
 */

const ROOT = fileURLToPath(new URL('../../', import.meta.url));

/** CPU seconds of the children this process has reaped (cutime + cstime, in clock ticks). */
function reapedChildrenSec(): number {
  try {
    const stat = readFileSync('/proc/self/stat', 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(fields[13]) + Number(fields[14])) / 100;
  } catch {
    return 0;
  }
}

const ownAtStart = process.cpuUsage();
const childrenAtStart = reapedChildrenSec();

afterAll((file) => {
  const own = process.cpuUsage(ownAtStart);
  const cpu = (own.user + own.system) / 1e6 + (reapedChildrenSec() - childrenAtStart);
  const { filepath, projectName } = file as { filepath?: string; projectName?: string };
  if (!filepath || !projectName) return;
  mkdirSync(dirname(CPU_LOG), { recursive: true });
  appendFileSync(CPU_LOG, `${JSON.stringify({ key: fileKey(ROOT, projectName, filepath), cpu })}\n`);
});
