/**
 * npm run test:durations: writes test/durations.json, the order a first run of the suite takes
 * its files in (test/helpers/longest-first.ts), from the durations of the last run in vitest's
 * cache and the CPU each file cost in it (test/helpers/file-cpu.ts). In
 * whole seconds, so that a run a little slower or faster changes few lines.
 */
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { CPU_LOG, type FileFigures } from './helpers/file-figures.js';
import { DURATIONS_FILE } from './helpers/longest-first.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const cacheDir = join(root, 'node_modules', '.vite', 'vitest');
const cpuByKey = new Map<string, number>();
if (existsSync(CPU_LOG)) {
  // The last line of a file is its last run's.
  for (const line of readFileSync(CPU_LOG, 'utf8').split('\n')) {
    if (!line) continue;
    const { key, cpu } = JSON.parse(line) as { key: string; cpu: number };
    cpuByKey.set(key, cpu);
  }
}
const seconds: Record<string, FileFigures> = {};
for (const dir of readdirSync(cacheDir)) {
  let text: string;
  try {
    text = readFileSync(join(cacheDir, dir, 'results.json'), 'utf8');
  } catch {
    continue;
  }
  const { results } = JSON.parse(text) as { results: [string, { duration?: number }][] };
  for (const [key, result] of results) {
    // Vitest's cache keeps files since deleted or renamed: only the suite's files now.
    const file = key.slice(key.indexOf(':') + 1);
    if (key.startsWith('slurm:') || result.duration === undefined || !existsSync(join(root, file))) continue;
    const cpu = cpuByKey.get(key);
    seconds[key] = {
      seconds: Math.round(result.duration / 1000),
      ...(cpu !== undefined && { cpu: Math.round(cpu) }),
    };
  }
}
if (Object.keys(seconds).length === 0) {
  process.stderr.write("no durations in vitest's cache: run npm test first\n");
  process.exit(1);
}
const sorted = Object.fromEntries(Object.entries(seconds).sort(([a], [b]) => a.localeCompare(b)));
writeFileSync(DURATIONS_FILE, `${JSON.stringify(sorted, null, 2)}\n`);
process.stdout.write(`test/durations.json: ${Object.keys(sorted).length} files\n`);
