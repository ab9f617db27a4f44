import { describe, expect, it } from 'vitest';
import { ManualClock, systemClock } from '../../src/lib/clock.js';

describe('ManualClock', () => {
  it('stands still until moved, and fires each sleep at its own moment, earliest first', async () => {
    const clock = new ManualClock(1_000_000);
    const fired: [string, number][] = [];
    const late = clock.sleep(300).then(() => fired.push(['late', clock.now()]));
    const early = clock.sleep(100).then(() => fired.push(['early', clock.now()]));
    await new Promise((r) => setImmediate(r));
    expect(fired).toEqual([]);
    expect(clock.now()).toBe(1_000_000);
    await clock.advance(250);
    await early;
    expect(fired).toEqual([['early', 1_000_100]]);
    expect(clock.now()).toBe(1_000_250);
    await clock.advance(50);
    await late;
    expect(fired).toEqual([
      ['early', 1_000_100],
      ['late', 1_000_300],
    ]);
    expect(clock.pending).toBe(0);
  });

  it('wakes a loop that sleeps again as often as the time moved allows', async () => {
    const clock = new ManualClock(0);
    const ticks: number[] = [];
    const controller = new AbortController();
    const loop = (async () => {
      for (;;) {
        await clock.sleep(1000, controller.signal);
        ticks.push(clock.now());
      }
    })().catch((error: unknown) => error);
    await clock.advance(3500);
    expect(ticks).toEqual([1000, 2000, 3000]);
    controller.abort(new Error('stopped'));
    expect(await loop).toMatchObject({ message: 'stopped' });
    expect(clock.pending).toBe(0);
  });

  it('a sleep aborted before it is due rejects with the reason and never fires', async () => {
    const clock = new ManualClock(0);
    const controller = new AbortController();
    const sleeping = clock.sleep(100, controller.signal);
    controller.abort(new Error('cancelled'));
    await expect(sleeping).rejects.toThrow('cancelled');
    await clock.advance(200);
    expect(clock.pending).toBe(0);
    await expect(clock.sleep(1, controller.signal)).rejects.toThrow('cancelled');
  });

  it('moves forward only', async () => {
    await expect(new ManualClock(0).advance(-1)).rejects.toThrow(/forward only/);
  });
});

describe('systemClock', () => {
  it('reads real time and sleeps in it, cancellably', async () => {
    const before = Date.now();
    expect(systemClock.now()).toBeGreaterThanOrEqual(before);
    await systemClock.sleep(5);
    expect(Date.now() - before).toBeGreaterThanOrEqual(4);
    const controller = new AbortController();
    const sleeping = systemClock.sleep(60_000, controller.signal);
    controller.abort(new Error('stop'));
    await expect(sleeping).rejects.toThrow('stop');
  });
});
