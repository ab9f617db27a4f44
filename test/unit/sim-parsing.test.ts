import { describe, expect, it } from 'vitest';
import { isLoopback } from '../../src/sim/loopback.js';
import { parseUnmungeOutput } from '../../src/sim/munge.js';
import { inUsageWindow } from '../../src/sim/routes/accounting.js';
import { expandOutputPattern, type SimJob } from '../../src/sim/sim-job.js';
import { decodeSubmitBody } from '../../src/sim/submit-request.js';

const UNMUNGE = `STATUS:          Replayed credential (17)
ENCODE_HOST:     localhost (127.0.0.1)
ENCODE_TIME:     2026-11-22 03:59:51 +0000 (1795319991)
DECODE_TIME:     2026-11-22 03:59:51 +0000 (1795319991)
TTL:             5
CIPHER:          aes128 (4)
UID:             alice (1003)
GID:             alice (1003)
LENGTH:          0
`;

describe('unmunge output', () => {
  it('gives status, encode host, TTL and user', () => {
    expect(parseUnmungeOutput(UNMUNGE)).toEqual({
      status: 'Replayed credential',
      statusCode: 17,
      encodeHost: 'localhost',
      encodeAddress: '127.0.0.1',
      ttlSec: 5,
      uid: 1003,
      userName: 'alice',
    });
  });
});

const job = { jobId: 42, name: 'align', user: 'alice', eligibleTime: 100, endTime: 0 } as SimJob;

describe('sbatch filename patterns', () => {
  it('expands %j, %x, %u, %N and %%', () => {
    expect(expandOutputPattern('%x-%j.%u.%N.100%%', job, 'node1')).toBe('align-42.alice.node1.100%');
  });
});

describe("slurmdbd's usage window", () => {
  it('matches jobs eligible before the end that had not ended before the start', () => {
    expect(inUsageWindow({ ...job, endTime: 150 }, 120, undefined, 200)).toBe(true);
    expect(inUsageWindow({ ...job, endTime: 110 }, 120, undefined, 200)).toBe(false);
    expect(inUsageWindow({ ...job, endTime: 0 }, 120, undefined, 200)).toBe(true);
    expect(inUsageWindow({ ...job, eligibleTime: 0 }, 0, undefined, 200)).toBe(false);
    expect(inUsageWindow({ ...job, eligibleTime: 0 }, undefined, undefined, 200)).toBe(true);
    expect(inUsageWindow(job, 50, 90, 200)).toBe(false);
  });
});

describe('job_submit_req decoding', () => {
  it('reads time_limit and memory as numbers or {set, infinite, number}', () => {
    const decoded = decodeSubmitBody({
      job: { script: '#!/bin/sh\n', time_limit: { set: true, number: 10 }, memory_per_node: 512, tasks: 2 },
    });
    expect(decoded).toMatchObject({ ok: true, request: { timeLimitMin: 10, memoryPerNodeMb: 512, tasks: 2 } });
    const infinite = decodeSubmitBody({ job: { time_limit: { infinite: true } } });
    expect(infinite).toMatchObject({ ok: true, request: { timeLimitMin: null } });
    const unset = decodeSubmitBody({ job: { time_limit: { set: false, number: 5 } } });
    expect(unset).toMatchObject({ ok: true, request: { timeLimitMin: undefined } });
  });

  it('takes the script from the top level when the job has none', () => {
    expect(decodeSubmitBody({ script: '#!/bin/sh\n', job: {} })).toMatchObject({
      ok: true,
      request: { script: '#!/bin/sh\n' },
    });
  });

  it('names the member with the wrong type', () => {
    expect(decodeSubmitBody({ job: { tasks: 'two' } })).toMatchObject({
      ok: false,
      message: expect.stringMatching(/^job\.tasks:/),
    });
    expect(decodeSubmitBody({})).toMatchObject({ ok: false, message: 'body has no "job" member' });
  });
});

describe('loopback clients (the admin endpoint, MUNGE credentials from this host)', () => {
  it('127/8, ::1 and IPv4-mapped 127/8 are loopback; other addresses are not', () => {
    for (const address of ['127.0.0.1', '127.1.2.3', '::1', '::ffff:127.0.0.1']) expect(isLoopback(address)).toBe(true);
    for (const address of ['10.0.0.5', '192.0.2.2', '::ffff:10.0.0.5', 'fe80::1', '::2', '']) {
      expect(isLoopback(address)).toBe(false);
    }
  });
});
