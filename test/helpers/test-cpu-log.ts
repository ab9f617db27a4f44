import { fileURLToPath } from 'node:url';

/** Where each test file's CPU is recorded (test/helpers/file-cpu.ts), a JSON line per file and run. */
export const CPU_LOG = fileURLToPath(new URL('../../.tmp/test-cpu.jsonl', import.meta.url));
