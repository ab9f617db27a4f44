import { mkdtempSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { describe, expect, it } from 'vitest';
import { readJobFile } from '../../src/cli/job-file.js';
import {
  type AttemptPolicy,
  attemptPolicySchema,
  backoffMs,
  CANCELLED_NOT_RETRIED,
  formatMemory,
  formatMinutes,
  nextSpec,
  policyIssues,
  retryMatch,
  retryReason,
} from '../../src/requests/attempt-policy.js';
import type { JobSpec } from '../../src/sched/job-spec.js';

/** The retry policy's pure logic: its schema, matching an end, backoff, and escalation within bounds. */

const parse = (input: unknown) => attemptPolicySchema.parse(input);
const issuesOf = (input: unknown) => {
  const result = attemptPolicySchema.safeParse(input);
  return result.success ? [] : result.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`);
};
const spec = (over: Partial<JobSpec> = {}): JobSpec => ({ name: 'j', script: '#!/bin/sh\ntrue', ...over });

describe('the policy schema', () => {
  it("keeps pipelines' { on, limit } valid, the same as before", () => {
    expect(parse({ on: ['NODE_FAIL'], limit: 1 })).toEqual({
      on: ['node_fail'],
      limit: 1,
      exitCodes: null,
      backoff: null,
      escalate: null,
    });
  });

  it('reads memory and time bounds in Slurm notation, and backoff as a duration or an object', () => {
    const policy = parse({
      on: ['OUT_OF_MEMORY', 'TIMEOUT', 'FAILED'],
      limit: 3,
      exit_codes: [75],
      backoff: { delay: '30s', factor: 2, max: '5m' },
      escalate: { memory_per_node: { factor: 2, max: '16G' }, time_limit: { factor: 1.5, max: '4:00:00' } },
    });
    expect(policy).toEqual({
      on: ['out_of_memory', 'timeout', 'failed'],
      limit: 3,
      exitCodes: [75],
      backoff: { delaySec: 30, factor: 2, maxSec: 300 },
      escalate: { memoryPerNode: { factor: 2, max: 16_384 }, timeLimit: { factor: 1.5, max: 240 } },
    });
    expect(parse({ on: ['FAILED'], limit: 1, backoff: '2m' }).backoff).toEqual({
      delaySec: 120,
      factor: 1,
      maxSec: null,
    });
  });

  it('says what is wrong, where', () => {
    expect(issuesOf({ on: ['FAILED'], limit: 11 })).toEqual(['limit: Too big: expected number to be <=10']);
    expect(issuesOf({ on: ['TIMEOUT'], limit: 1, exit_codes: [3] })).toEqual([
      'exit_codes: exit_codes is about FAILED: add FAILED to on',
    ]);
    expect(issuesOf({ on: ['FAILED'], limit: 1, escalate: { memory_per_node: { factor: 2, max: '16G' } } })).toEqual([
      'escalate.memory_per_node: memory_per_node grows on OUT_OF_MEMORY: add OUT_OF_MEMORY to on',
    ]);
    expect(issuesOf({ on: ['TIMEOUT'], limit: 1, escalate: { time_limit: { factor: 0.5, max: 60 } } })).toEqual([
      'escalate.time_limit.factor: a factor above 1 (2 doubles)',
    ]);
    expect(
      issuesOf({ on: ['OUT_OF_MEMORY'], limit: 1, escalate: { memory_per_node: { factor: 2, max: 'lots' } } }),
    ).toEqual(['escalate.memory_per_node.max: "lots" is not a memory size (e.g. 512, 512M, 4G)']);
    expect(issuesOf({ on: ['EXPLODED'], limit: 1 })[0]).toMatch(/^on\.0: Invalid option/);
    expect(issuesOf({ on: ['FAILED'], limit: 1, retries: 2 })[0]).toMatch(/retries/);
  });

  it('refuses CANCELLED: a cancel is never retried', () => {
    expect(issuesOf({ on: ['FAILED', 'CANCELLED'], limit: 1 })).toEqual([`on.1: ${CANCELLED_NOT_RETRIED}`]);
    expect(CANCELLED_NOT_RETRIED).toMatch(/^CANCELLED is never retried: .* remove it from on$/);
  });

  it('checks the policy against the spec: a resource grows from a value the spec sets, below its bound', () => {
    const policy = parse({
      on: ['OUT_OF_MEMORY', 'TIMEOUT'],
      limit: 2,
      escalate: { memory_per_node: { factor: 2, max: '16G' }, time_limit: { factor: 1.5, max: '4:00:00' } },
    });
    expect(policyIssues(policy, spec({ memory_per_node: 4096, time_limit: 60 }))).toEqual([]);
    expect(policyIssues(policy, spec())).toEqual([
      "retry.escalate.memory_per_node grows the job's memory_per_node: set memory_per_node",
      "retry.escalate.time_limit grows the job's time_limit: set a finite time_limit",
    ]);
    expect(policyIssues(policy, spec({ memory_per_node: 32_768, time_limit: 240 }))).toEqual([
      "retry.escalate.memory_per_node: the job's memory_per_node (32G) is already at its bound (16G)",
      "retry.escalate.time_limit: the job's time_limit (4:00:00) is already at its bound (4:00:00)",
    ]);
  });
});

describe('matching an end', () => {
  const policy: AttemptPolicy = parse({ on: ['FAILED', 'NODE_FAIL'], limit: 2, exit_codes: [75, 3] });

  it('retries the states it names, FAILED only with a listed exit code', () => {
    expect(retryMatch(policy, { state: 'node_fail', exitCode: null, attempt: 1 })).toBe('yes');
    expect(retryMatch(policy, { state: 'failed', exitCode: 75, attempt: 1 })).toBe('yes');
    expect(retryMatch(policy, { state: 'failed', exitCode: 1, attempt: 1 })).toBe('no');
    expect(retryMatch(policy, { state: 'failed', exitCode: null, attempt: 1 })).toBe('no');
    expect(retryMatch(policy, { state: 'timeout', exitCode: null, attempt: 1 })).toBe('no');
    expect(retryMatch(policy, { state: 'completed', exitCode: 0, attempt: 1 })).toBe('no');
  });

  it('FAILED without exit_codes is retried whatever the code', () => {
    expect(retryMatch(parse({ on: ['FAILED'], limit: 1 }), { state: 'failed', exitCode: 9, attempt: 1 })).toBe('yes');
  });

  it('never retries a cancel, even under a policy stored before the schema refused CANCELLED', () => {
    const stored: AttemptPolicy = { ...policy, on: ['failed', 'cancelled'] };
    expect(retryMatch(stored, { state: 'cancelled', exitCode: 0, attempt: 1 })).toBe('no');
    expect(retryMatch(stored, { state: 'failed', exitCode: 75, attempt: 1 })).toBe('yes');
  });

  it('stops after `limit` further attempts', () => {
    expect(retryMatch(policy, { state: 'node_fail', exitCode: null, attempt: 2 })).toBe('yes');
    expect(retryMatch(policy, { state: 'node_fail', exitCode: null, attempt: 3 })).toBe('exhausted');
  });
});

describe('backoff', () => {
  it('grows by its factor from the first retry, up to its max', () => {
    const policy = parse({ on: ['FAILED'], limit: 5, backoff: { delay: 10, factor: 3, max: '1m' } });
    expect([1, 2, 3, 4].map((attempt) => backoffMs(policy, attempt))).toEqual([10_000, 30_000, 60_000, 60_000]);
    expect(backoffMs(parse({ on: ['FAILED'], limit: 1 }), 1)).toBe(0);
  });
});

describe('escalation', () => {
  const policy = parse({
    on: ['OUT_OF_MEMORY', 'TIMEOUT', 'NODE_FAIL'],
    limit: 5,
    escalate: { memory_per_node: { factor: 2, max: '16G' }, time_limit: { factor: 1.5, max: '4:00:00' } },
  });

  it('doubles memory on OUT_OF_MEMORY, up to the bound and never past it', () => {
    const memoryOf = (mb: number) => {
      const next = nextSpec(policy, spec({ memory_per_node: mb }), 'out_of_memory');
      return next.kind === 'retry' ? next.spec.memory_per_node : next.reason;
    };
    expect(memoryOf(4096)).toBe(8192);
    expect(memoryOf(8192)).toBe(16_384);
    // ×2 would be 24G: the bound, 16G, is taken instead.
    expect(memoryOf(12_288)).toBe(16_384);
    expect(memoryOf(16_384)).toBe(
      "OUT_OF_MEMORY: memory_per_node is 16G already, and the policy's bound is 16G; no retry is made",
    );
  });

  it('grows the time limit ×1.5 on TIMEOUT, in whole minutes, up to 4 h', () => {
    const timeOf = (min: number) => {
      const next = nextSpec(policy, spec({ time_limit: min }), 'timeout');
      return next.kind === 'retry' ? next.spec.time_limit : 'bound';
    };
    expect([timeOf(60), timeOf(90), timeOf(135), timeOf(203), timeOf(240)]).toEqual([90, 135, 203, 240, 'bound']);
  });

  it("keeps to the partition's limit when it is lower than the policy's bound", () => {
    const next = nextSpec(policy, spec({ memory_per_node: 4096 }), 'out_of_memory', { maxMemoryPerNodeMb: 6144 });
    expect(next).toMatchObject({
      kind: 'retry',
      escalated: [{ field: 'memory_per_node', from: 4096, to: 6144, cappedBy: 'partition' }],
    });
    expect(nextSpec(policy, spec({ time_limit: 120 }), 'timeout', { maxTimeMin: 120 })).toEqual({
      kind: 'bound',
      reason: "TIMEOUT: time_limit is 2:00:00 already, and the partition's limit is 2:00:00; no retry is made",
    });
  });

  it('grows only what the end calls for, and nothing on other ends', () => {
    const s = spec({ memory_per_node: 4096, time_limit: 60 });
    expect(nextSpec(policy, s, 'timeout')).toMatchObject({
      kind: 'retry',
      spec: { memory_per_node: 4096, time_limit: 90 },
    });
    expect(nextSpec(policy, s, 'node_fail')).toEqual({ kind: 'retry', spec: s, escalated: [] });
  });

  it('says why an attempt was made', () => {
    expect(
      retryReason({ state: 'out_of_memory', exitCode: 0, attempt: 1 }, [
        { field: 'memory_per_node', from: 4096, to: 8192 },
      ]),
    ).toBe('OUT_OF_MEMORY on attempt 1; memory_per_node 4G → 8G');
    expect(retryReason({ state: 'failed', exitCode: 75, attempt: 2 }, [])).toBe('FAILED (exit 75) on attempt 2');
  });

  it('writes sizes and times as Slurm does', () => {
    expect([formatMemory(16_384), formatMemory(1536)]).toEqual(['16G', '1536M']);
    expect([formatMinutes(90), formatMinutes(1500)]).toEqual(['1:30:00', '1-01:00:00']);
  });
});

describe('a job file with a policy', () => {
  const write = (text: string) => {
    const file = join(mkdtempSync(join(tmpdir(), 'schedflow-jobfile-')), 'job.yaml');
    writeFileSync(file, text);
    return file;
  };
  const job = 'name: j\nscript: "#!/bin/sh\\ntrue\\n"\nmemory_per_node: 4G\n';

  it('reads the spec and the policy as written', () => {
    const read = readJobFile(
      write(
        `${job}retry:\n  on: [OUT_OF_MEMORY]\n  limit: 2\n  escalate: { memory_per_node: { factor: 2, max: 16G } }\n`,
      ),
    );
    expect(read.spec).toMatchObject({ name: 'j', memory_per_node: 4096 });
    expect(read.retry).toEqual({
      on: ['OUT_OF_MEMORY'],
      limit: 2,
      escalate: { memory_per_node: { factor: 2, max: '16G' } },
    });
    expect(readJobFile(write(job)).retry).toBeUndefined();
  });

  it('says a mistake with its line, and a policy the spec cannot serve', () => {
    const bad = write(`${job}retry:\n  on: [TIMEOUT]\n  exit_codes: [75]\n  limit: 1\n`);
    expect(() => readJobFile(bad)).toThrow(
      /job\.yaml:6:\d+: retry\.exit_codes: exit_codes is about FAILED: add FAILED to on/,
    );
    const noTime = write(
      `${job}retry:\n  on: [TIMEOUT]\n  limit: 1\n  escalate: { time_limit: { factor: 2, max: 60 } }\n`,
    );
    expect(() => readJobFile(noTime)).toThrow(
      "retry.escalate.time_limit grows the job's time_limit: set a finite time_limit",
    );
  });
});
