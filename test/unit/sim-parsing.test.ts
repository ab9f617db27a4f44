import { describe, expect, it } from 'vitest';
import { defaultWindow, inStateDuring, matchesFilter } from '../../src/sim/accounting-query.js';
import { parseLenientJson } from '../../src/sim/lenient-json.js';
import { isLoopback } from '../../src/sim/loopback.js';
import { parseUnmungeOutput } from '../../src/sim/munge.js';
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

describe("slurmdbd's job query (slurmdb_job_cond_def_start_end and the mysql plugin)", () => {
  const now = 1000;
  const ended = {
    ...job,
    account: 'lab',
    partition: 'debug',
    state: 'FAILED',
    submitTime: 100,
    startTime: 110,
    endTime: 150,
  } as SimJob;

  it('defaults the window as Slurm does', () => {
    // No states, no ids: from midnight to now.
    expect(defaultWindow({}, now).end).toBe(now);
    // Ids only: all time up to now.
    expect(defaultWindow({ jobIds: [42] }, now)).toEqual({ start: 0, end: now });
    // States with a start and no end: that instant only.
    expect(defaultWindow({ states: ['RUNNING'], startSec: 120 }, now)).toEqual({ start: 120, end: 120 });
    // States only: now.
    expect(defaultWindow({ states: ['RUNNING'] }, now)).toEqual({ start: now, end: now });
    // States and ids: from 0 (or the start) up to now.
    expect(defaultWindow({ states: ['RUNNING'], jobIds: [42] }, now)).toEqual({ start: 0, end: now });
  });

  it('matches jobs eligible before the end that had not ended before the start', () => {
    expect(matchesFilter({ ...ended, endTime: 150 }, { startSec: 120 }, 200)).toBe(true);
    expect(matchesFilter({ ...ended, endTime: 110 }, { startSec: 120 }, 200)).toBe(false);
    expect(matchesFilter({ ...ended, endTime: 0 }, { startSec: 120 }, 200)).toBe(true);
    expect(matchesFilter({ ...ended, eligibleTime: 0 }, { startSec: 1 }, 200)).toBe(false);
    expect(matchesFilter(ended, { startSec: 50, endSec: 90 }, 200)).toBe(false);
    // Asked for by id, a job that never became eligible is found too.
    expect(matchesFilter({ ...ended, eligibleTime: 0 }, { jobIds: [42] }, 200)).toBe(true);
  });

  it('a state matches a job that was in it during the window', () => {
    expect(inStateDuring(ended, 'RUNNING', { start: 120, end: 130 })).toBe(true);
    expect(inStateDuring(ended, 'RUNNING', { start: 160, end: 170 })).toBe(false);
    expect(inStateDuring(ended, 'FAILED', { start: 120, end: 150 })).toBe(true);
    expect(inStateDuring(ended, 'FAILED', { start: 151, end: 200 })).toBe(false);
    expect(inStateDuring(ended, 'PENDING', { start: 100, end: 200 })).toBe(true);
    // The poller's question, states and a start but no end: the window is one instant.
    expect(matchesFilter(ended, { states: ['RUNNING'], startSec: 100, jobIds: [42] }, now)).toBe(false);
    expect(matchesFilter(ended, { states: ['RUNNING'], startSec: 100, endSec: now, jobIds: [42] }, now)).toBe(true);
  });
});

describe('request bodies as slurmrestd reads them', () => {
  it('takes bare NaN and Infinity, in any case, outside strings only', () => {
    expect(parseLenientJson('{"a":NaN,"b":[Infinity,-infinity],"c":nan}')).toEqual({
      a: Number.NaN,
      b: [Number.POSITIVE_INFINITY, Number.NEGATIVE_INFINITY],
      c: Number.NaN,
    });
    expect(parseLenientJson('{"s":"NaN \\" Infinity","n":NaN}')).toEqual({ s: 'NaN " Infinity', n: Number.NaN });
  });

  it('refuses what is not JSON otherwise, and a bare word as a key', () => {
    expect(() => parseLenientJson('not json')).toThrow(SyntaxError);
    expect(() => parseLenientJson('{"a":NaNa}')).toThrow(SyntaxError);
    expect(() => parseLenientJson('{NaN:1}')).toThrow(SyntaxError);
    expect(() => parseLenientJson('{"a":Infinity')).toThrow(SyntaxError);
  });
});

describe('job_submit_req decoding', () => {
  it('reads time_limit and memory as numbers or {set, infinite, number}', () => {
    const decoded = decodeSubmitBody({
      job: { script: '#!/bin/sh\n', time_limit: { set: true, number: 10 }, memory_per_node: 512, tasks: 2 },
    });
    expect(decoded).toMatchObject({ ok: true, request: { timeLimitMin: 10, memoryPerNodeMb: 512, tasks: 2 } });
    const infinite = decodeSubmitBody({ job: { script: '#!/bin/sh\n', time_limit: { infinite: true } } });
    expect(infinite).toMatchObject({ ok: true, request: { timeLimitMin: null } });
    const unset = decodeSubmitBody({ job: { script: '#!/bin/sh\n', time_limit: { set: false, number: 5 } } });
    expect(unset).toMatchObject({ ok: true, request: { timeLimitMin: undefined } });
  });

  it('takes the script from the top level when the job has none', () => {
    expect(decodeSubmitBody({ script: '#!/bin/sh\n', job: {} })).toMatchObject({
      ok: true,
      request: { script: '#!/bin/sh\n' },
    });
  });

  it('names the member with a type it cannot coerce', () => {
    expect(decodeSubmitBody({ job: { tasks: [2] } })).toMatchObject({
      ok: false,
      problem: 'invalid',
      message: expect.stringMatching(/^job\.tasks:/),
    });
  });

  it('coerces numbers, booleans and strings as slurmrestd does, with its warnings in its field order', () => {
    const script = '#!/bin/sh\n';
    expect(decodeSubmitBody({ job: { script, name: 5, comment: 5.5, account: true } })).toEqual({
      ok: true,
      request: expect.objectContaining({ name: '5', comment: '5.500000', account: 'true' }),
      warnings: [
        {
          description:
            'Expected OpenAPI type=string (Slurm type=string) but got OpenAPI type=boolean (Slurm type=boolean): true',
          source: '#/job/account/',
        },
        {
          description:
            'Expected OpenAPI type=string (Slurm type=string) but got OpenAPI type=number (Slurm type=floating point number): 5.5',
          source: '#/job/comment/',
        },
        {
          description:
            'Expected OpenAPI type=string (Slurm type=string) but got OpenAPI type=integer (Slurm type=64 bit integer): 5',
          source: '#/job/name/',
        },
      ],
    });
    const int32 = 'Expected OpenAPI type=integer format=int32 (Slurm type=64 bit integer) but got OpenAPI type=';
    expect(decodeSubmitBody({ job: { script, tasks: Number.NaN } })).toMatchObject({
      ok: true,
      request: { tasks: undefined },
      warnings: [{ description: `${int32}number (Slurm type=floating point number): 1.8446744073709552e+19` }],
    });
    expect(decodeSubmitBody({ job: { script, tasks: 1e30 } })).toMatchObject({
      request: { tasks: undefined },
      warnings: [{ description: `${int32}number (Slurm type=floating point number): 1e+30` }],
    });
    expect(decodeSubmitBody({ job: { script, tasks: 2.5, cpus_per_task: '3' } })).toMatchObject({
      request: { tasks: 2, cpusPerTask: 3 },
      warnings: [
        { description: `${int32}number (Slurm type=floating point number): 2.5`, source: '#/job/tasks/' },
        { description: `${int32}string (Slurm type=string): "3"`, source: '#/job/cpus_per_task/' },
      ],
    });
    expect(decodeSubmitBody({ job: { script, memory_per_node: '100', time_limit: Number.NaN } })).toMatchObject({
      request: { memoryPerNodeMb: 100, timeLimitMin: undefined },
      warnings: [],
    });
  });

  it('drops a submission with a word or a boolean for an integer: a warning, no error', () => {
    expect(decodeSubmitBody({ job: { script: '#!/bin/sh\n', tasks: 'two' } })).toEqual({
      ok: false,
      problem: 'dropped',
      message: expect.any(String),
      warnings: [
        {
          description:
            'Expected OpenAPI type=integer format=int32 (Slurm type=64 bit integer) but got OpenAPI type=string (Slurm type=string): "two"',
          source: '#/job/tasks/',
        },
      ],
    });
    expect(decodeSubmitBody({ job: { script: '#!/bin/sh\n', tasks: true } })).toMatchObject({ problem: 'dropped' });
  });

  it('refuses a job without a script, and one with an empty script, in slurmrestd’s words', () => {
    expect(decodeSubmitBody({})).toMatchObject({
      ok: false,
      problem: 'no-script',
      message: 'Populated "script" field is required for job submission',
    });
    expect(decodeSubmitBody({ job: { name: 'x' } })).toMatchObject({ ok: false, problem: 'no-script' });
    expect(decodeSubmitBody({ job: { script: '' } })).toMatchObject({
      ok: false,
      problem: 'empty-script',
      message: 'Batch job script empty or missing',
    });
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
