import { pino } from 'pino';
import { afterEach, expect, it } from 'vitest';
import { HeapCollector } from '../../src/lib/heap-collector.js';

let collector: HeapCollector | undefined;
afterEach(() => collector?.stop());

it('collects once the heap has grown by 64 MB of garbage, and gives it back', () => {
  collector = new HeapCollector(pino({ level: 'silent' }));
  expect(collector.check()).toBe(false);
  // ~100 MB of short-lived objects, as a burst of submissions leaves behind.
  let garbage: { id: string; spec: { script: string } }[][] | null = [];
  for (let r = 0; r < 10; r++) {
    garbage.push(
      Array.from({ length: 100_000 }, (_, i) => ({ id: `r${r}-${i}`, spec: { script: `#!/bin/sh\n${i}` } })),
    );
  }
  const grown = process.memoryUsage().heapUsed;
  garbage = null;
  expect(collector.check()).toBe(true);
  expect(process.memoryUsage().heapUsed).toBeLessThan(grown - 64 * 1024 * 1024);
  // Nothing grew since: no second collection.
  expect(collector.check()).toBe(false);
});
