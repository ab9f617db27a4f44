import { describe, expect, it } from 'vitest';
import { loadDaemonConfig } from '../../src/config/daemon-config.js';
import { queueSettingsOf } from '../../workers/queues.js';
import { submitQueue } from '../../workers/submit.js';

const summaries = { attempts: 3, backoffMs: 1000, concurrency: 1, dispatchEveryMs: 1000 };

/** The submit worker's concurrency for a daemon with these settings and profiles' `concurrency`. */
function submitWorkers(env: NodeJS.ProcessEnv, profileConcurrency: number[]): unknown {
  const config = loadDaemonConfig(env);
  return submitQueue.workerOptions(queueSettingsOf(config, summaries as never, profileConcurrency)).concurrency;
}

describe('submit worker concurrency', () => {
  it('is 16 for profiles of 4 connections or fewer between them', () => {
    expect(submitWorkers({}, [4])).toBe(16);
    expect(submitWorkers({}, [1, 2])).toBe(16);
  });

  it('is 4 per connection past that, so that every connection has a submission waiting for it', () => {
    expect(submitWorkers({}, [16])).toBe(64);
    expect(submitWorkers({}, [4, 4, 2])).toBe(40);
  });

  it('is at most 128, however many connections the profiles have', () => {
    expect(
      submitWorkers(
        {},
        Array.from({ length: 10 }, () => 16),
      ),
    ).toBe(128);
  });

  it('is SCHEDFLOW_SUBMIT_CONCURRENCY when it is set, whatever the profiles', () => {
    expect(submitWorkers({ SCHEDFLOW_SUBMIT_CONCURRENCY: '8' }, [16])).toBe(8);
  });
});
