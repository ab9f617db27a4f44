import { pino } from 'pino';
import { afterEach, expect, it } from 'vitest';
import { HeapCollector } from '../../src/lib/heap-collector.js';

let collector: HeapCollector | undefined;
afterEach(() => collector?.stop());

it('collects once the heap has grown by 64 MB of garbage, and gives it back', () => {
  collector = new HeapCollector(pino({ level: 'silent' }), () => 0);
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
  // Live data does not raise the bar: once it is gone, its garbage is collected.
  let live: string[] | null = Array.from({ length: 2_500_000 }, (_, i) => `live-${i}`);
  expect(collector.check()).toBe(true);
  expect(live).toHaveLength(2_500_000);
  live = null;
  const garbage2 = Array.from({ length: 100_000 }, (_, i) => ({ id: `g${i}`, spec: { script: `#!/bin/sh\n${i}` } }));
  expect(garbage2).toHaveLength(100_000);
  expect(collector.check()).toBe(true);
});

it('waits while the event loop is busy, unless the heap has grown by 256 MB', () => {
  let utilization = 0.9;
  collector = new HeapCollector(pino({ level: 'silent' }), () => utilization);
  // Arrays of doubles: 800 KB of heap each.
  const doubles = (mb: number) => Array.from({ length: (mb * 10) / 8 }, () => new Array(100_000).fill(0.5));
  let garbage: number[][] | null = doubles(100);
  expect(garbage.length).toBeGreaterThan(0);
  garbage = null;
  expect(collector.check()).toBe(false);
  utilization = 0.1;
  expect(collector.check()).toBe(true);
  // Busy, but grown far more: collected anyway.
  utilization = 0.9;
  let more: number[][] | null = doubles(300);
  expect(more.length).toBeGreaterThan(0);
  more = null;
  expect(collector.check()).toBe(true);
});

it('after a burst, collects 32 MB of garbage while busy', () => {
  collector = new HeapCollector(pino({ level: 'silent' }), () => 0.9);
  const doubles = (mb: number) => Array.from({ length: (mb * 10) / 8 }, () => new Array(100_000).fill(0.5));
  let garbage: number[][] | null = doubles(48);
  expect(garbage.length).toBeGreaterThan(0);
  garbage = null;
  // The timer's check waits while busy; a mass end's cycle does not.
  expect(collector.check()).toBe(false);
  expect(collector.afterBurst()).toBe(true);
  expect(collector.afterBurst()).toBe(false);
});
