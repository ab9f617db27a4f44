/**
 * npm run test:durations: writes test/durations.json, the order a first run of the suite takes
 * its files in (test/helpers/longest-first.ts), from the durations of the last run in vitest's
 * cache. In whole seconds, so that a run a little slower or faster changes few lines.
 */
import { existsSync, readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { DURATIONS_FILE } from './helpers/longest-first.js';

const root = fileURLToPath(new URL('..', import.meta.url));
const cacheDir = join(root, 'node_modules', '.vite', 'vitest');
const seconds: Record<string, number> = {};
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
    seconds[key] = Math.round(result.duration / 1000);
  }
}
if (Object.keys(seconds).length === 0) {
  process.stderr.write("no durations in vitest's cache: run npm test first\n");
  process.exit(1);
}
const sorted = Object.fromEntries(Object.entries(seconds).sort(([a], [b]) => a.localeCompare(b)));
writeFileSync(DURATIONS_FILE, `${JSON.stringify(sorted, null, 2)}\n`);
process.stdout.write(`test/durations.json: ${Object.keys(sorted).length} files\n`);
