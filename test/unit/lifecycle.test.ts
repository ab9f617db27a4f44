import { Writable } from 'node:stream';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { Lifecycle, StopRequestedError } from '../../src/lifecycle.js';

/** A real pino logger writing its JSON lines into an array. */
function capturedLogger() {
  const lines: { msg: string; step?: string; timeoutMs?: number }[] = [];
  const stream = new Writable({
    write(chunk: Buffer, _encoding, done) {
      for (const line of chunk.toString().split('\n').filter(Boolean)) lines.push(JSON.parse(line));
      done();
    },
  });
  return { logger: pino({ level: 'debug' }, stream), lines };
}

describe('Lifecycle', () => {
  it("bounds a stop by the start's wait and every step's own limit, which hanging steps take in full", async () => {
    const { logger } = capturedLogger();
    const lifecycle = new Lifecycle(logger, { stepTimeoutMs: 40, startWaitMs: 30 });
    expect(lifecycle.worstCaseStopMs).toBe(30);
    lifecycle.add('sqlite', () => new Promise<void>(() => {}));
    lifecycle.add('workers', () => new Promise<void>(() => {}), { timeoutMs: 60 });
    const bound = lifecycle.worstCaseStopMs;
    expect(bound).toBe(30 + 40 + 60);
    // Real time: the limits are what is measured. No start under way: the steps alone, each to its limit.
    const startedAt = Date.now();
    await lifecycle.stop();
    const took = Date.now() - startedAt;
    expect(took).toBeGreaterThanOrEqual(95);
    expect(took).toBeLessThan(bound + 1000);
  });

  it('runs every step in reverse order; one that hangs is logged and skipped, the later ones still run', async () => {
    const { logger, lines } = capturedLogger();
    const lifecycle = new Lifecycle(logger, { stepTimeoutMs: 1000 });
    const ran: string[] = [];
    lifecycle.add('sqlite', async () => {
      ran.push('sqlite');
    });
    lifecycle.add('redis', async () => {
      ran.push('redis');
    });
    lifecycle.add('workers', () => new Promise<void>(() => ran.push('workers')), { timeoutMs: 50 });
    lifecycle.add('api', async () => {
      throw new Error('close failed');
    });

    const startedAt = Date.now();
    await lifecycle.stop();
    expect(Date.now() - startedAt).toBeLessThan(1000);
    expect(ran).toEqual(['workers', 'redis', 'sqlite']);
    expect(lines.map((l) => [l.msg, l.step])).toEqual([
      ['shutdown step failed', 'api'],
      ['shutdown step timed out; going on with the next', 'workers'],
      ['shutdown step done', 'redis'],
      ['shutdown step done', 'sqlite'],
      ['shutdown complete', undefined],
    ]);
    // One cached promise: a second stop runs nothing again.
    await lifecycle.stop();
    expect(ran).toHaveLength(3);
  });

  it('a stop during the start waits for it to reach its next step, which is undone, and ends the start there', async () => {
    const { logger } = capturedLogger();
    const lifecycle = new Lifecycle(logger);
    const ran: string[] = [];
    let startedRedis: () => void = () => {};
    const start = lifecycle.track(
      (async () => {
        lifecycle.add('history', async () => {
          ran.push('history');
        });
        await new Promise<void>((resolve) => {
          startedRedis = resolve;
        });
        lifecycle.add('redis', async () => {
          ran.push('redis');
        });
        lifecycle.add('workers', async () => {
          ran.push('workers');
        });
      })(),
    );
    const stopped = lifecycle.stop();
    startedRedis();
    await expect(start).rejects.toBeInstanceOf(StopRequestedError);
    await stopped;
    expect(ran).toEqual(['redis', 'history']);
  });
});
