import { relative } from 'node:path';
import { fileURLToPath } from 'node:url';

/**
 * What a run measures of each test file, for the order of the next (longest-first.ts): shared
 * by the setup file that records it, the sequencer and `npm run test:durations`, none of which
 * may import what the others do (vitest's runtime, its node API).
 */

/** A file as a run measured it: its duration, and the CPU it cost (test/helpers/file-cpu.ts). */
export interface FileFigures {
  seconds: number;
  cpu?: number;
}

/** Vitest's key for a file's results: `<project>:<path from the root>`. */
export function fileKey(root: string, project: string, file: string): string {
  return `${project}:${relative(root, file)}`;
}

/** Where each test file's CPU is recorded (test/helpers/file-cpu.ts), a JSON line per file and run. */
export const CPU_LOG = fileURLToPath(new URL('../../.tmp/test-cpu.jsonl', import.meta.url));
