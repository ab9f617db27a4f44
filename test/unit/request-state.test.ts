import { describe, expect, it } from 'vitest';
import { canTransition, isTerminalRequest, requestStateFor } from '../../src/requests/request-state.js';
import { JOB_STATES } from '../../src/sched/job-model.js';
import { pollIntervalMs, rateLimitedPollIntervalMs } from '../../workers/poll.js';

describe('request state machine', () => {
  it('moves forward only', () => {
    expect(canTransition('submitted', 'running')).toBe(true);
    expect(canTransition('running', 'completed')).toBe(true);
    expect(canTransition('running', 'submitted')).toBe(false);
    expect(canTransition('pending', 'pending')).toBe(false);
  });

  it('never leaves a terminal state; a requeued job may go from running back to pending', () => {
    expect(canTransition('completed', 'running')).toBe(false);
    expect(canTransition('submit_failed', 'submitted')).toBe(false);
    expect(canTransition('running', 'pending')).toBe(true);
  });

  it('a submission refused over a submit limit waits, and goes on from waiting when it is accepted', () => {
    expect(canTransition('queued', 'waiting')).toBe(true);
    expect(canTransition('submitting', 'waiting')).toBe(true);
    expect(canTransition('waiting', 'submitting')).toBe(true);
    expect(canTransition('waiting', 'submitted')).toBe(true);
    expect(canTransition('waiting', 'cancelled')).toBe(true);
    expect(canTransition('submitted', 'waiting')).toBe(false);
    expect(isTerminalRequest('waiting')).toBe(false);
  });

  it('lost is not terminal: accounting may resolve it into any state', () => {
    expect(isTerminalRequest('lost')).toBe(false);
    expect(canTransition('lost', 'completed')).toBe(true);
    expect(canTransition('lost', 'running')).toBe(true);
    expect(canTransition('running', 'lost')).toBe(true);
  });

  it('maps every Slurm base state; an unknown one changes nothing', () => {
    const mapped = Object.fromEntries(JOB_STATES.map((s) => [s, requestStateFor(s)]));
    expect(mapped).toEqual({
      PENDING: 'pending',
      RUNNING: 'running',
      SUSPENDED: 'running',
      COMPLETED: 'completed',
      CANCELLED: 'cancelled',
      FAILED: 'failed',
      TIMEOUT: 'timeout',
      NODE_FAIL: 'node_fail',
      PREEMPTED: 'preempted',
      BOOT_FAIL: 'boot_fail',
      DEADLINE: 'deadline',
      OUT_OF_MEMORY: 'out_of_memory',
      UNKNOWN: null,
    });
  });
});

describe('poll interval', () => {
  it('follows the cache lifetime within the floor and the ceiling', () => {
    expect(pollIntervalMs(5, 2000, 60_000)).toBe(5000);
    expect(pollIntervalMs(1, 2000, 60_000)).toBe(2000);
    expect(pollIntervalMs(300, 2000, 60_000)).toBe(60_000);
    expect(pollIntervalMs(null, 2000, 60_000)).toBe(2000);
  });
});

describe('poll interval behind a rate-limiting proxy', () => {
  it('spaces polls to a twentieth of the pace, by what the last cycle cost (a request per chunk of ids)', () => {
    // One request a second: a 2-request cycle every 40 s; a 21-request cycle (10,000 jobs) would
    // take the whole budget at that spacing, so its polls go further apart (up to the ceiling).
    expect(rateLimitedPollIntervalMs(2000, 1, 600_000)).toBe(40_000);
    expect(rateLimitedPollIntervalMs(2000, 1, 600_000, 1)).toBe(40_000);
    expect(rateLimitedPollIntervalMs(2000, 1, 600_000, 21)).toBe(420_000);
    expect(rateLimitedPollIntervalMs(2000, 1, 60_000, 21)).toBe(60_000);
  });

  it('without 429s, while submissions wait: polls take at most half the pace, which up to 500 jobs changes nothing', () => {
    // The default budget (5 a second): a 2-request cycle fits the floor; 21 requests (10,000 jobs) every 8.4 s.
    expect(rateLimitedPollIntervalMs(2000, 5, 60_000, 2, 0.5)).toBe(2000);
    expect(rateLimitedPollIntervalMs(2000, 5, 60_000, 21, 0.5)).toBe(8400);
  });
});
