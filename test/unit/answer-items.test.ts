import { describe, expect, it } from 'vitest';
import { AnswerShapeError, itemsOfParsed, itemsOfStream } from '../../src/sched/answer-items.js';

/** List answers decoded record by record: as they arrive, or from a body parsed whole. */

async function* chunksOf(text: string, size: number) {
  const bytes = Buffer.from(text);
  for (let at = 0; at < bytes.length; at += size) yield bytes.subarray(at, at + size);
}

const body = {
  meta: { plugin: { data_parser: 'data_parser/v0.0.44' } },
  jobs: [{ job_id: 1, name: 'é "quoted" \\ \u2603' }, { job_id: 2, list: [1, [2, { a: null }]] }, { job_id: 3 }],
  errors: [],
  warnings: [{ description: 'w' }],
  last_update: { set: true, number: 5 },
};
const keepOdd = (raw: unknown) => {
  const id = (raw as { job_id: number }).job_id;
  return id % 2 === 1 ? raw : undefined;
};

describe('answer items', () => {
  it('stream and whole give the same records and the same rest, at any chunk size (split UTF-8 included)', async () => {
    const whole = await itemsOfParsed(structuredClone(body), { member: 'jobs', decode: keepOdd });
    expect(whole.items).toEqual([body.jobs[0], body.jobs[2]]);
    expect(whole.seen).toBe(3);
    expect(whole.rest).toEqual({ meta: body.meta, errors: [], warnings: body.warnings, last_update: body.last_update });
    for (const size of [1, 2, 3, 7, 64, 100_000]) {
      const streamed = await itemsOfStream(chunksOf(JSON.stringify(body), size), { member: 'jobs', decode: keepOdd });
      expect(streamed).toEqual(whole);
    }
  });

  it('an empty list, and records kept one by one, not in the parsed tree', async () => {
    const empty = await itemsOfStream(chunksOf('{"jobs":[],"meta":{}}', 4), { member: 'jobs', decode: (r) => r });
    expect(empty).toEqual({ rest: { meta: {} }, items: [], seen: 0 });
    const many = JSON.stringify({ jobs: Array.from({ length: 5000 }, (_, i) => ({ job_id: i })) });
    const read = await itemsOfStream(chunksOf(many, 4096), {
      member: 'jobs',
      decode: (r) => (r as { job_id: number }).job_id,
    });
    expect(read.items).toHaveLength(5000);
    expect(read.items[4999]).toBe(4999);
    expect(read.rest).toEqual({});
  });

  it('not JSON, cut short, or without the list: AnswerShapeError; a record the decoder refuses: its error', async () => {
    const decode = (r: unknown) => r;
    for (const [text, message] of [
      ['{"jobs":[1,2', /truncated JSON/],
      ['{"jobs":[1,}', /invalid JSON/],
      ['<html>', /invalid JSON/],
      ['{"jobs":3}', /without a "jobs" array/],
      ['[1,2]', /without a "jobs" array/],
    ] as const) {
      const error = await itemsOfStream(chunksOf(text, 3), { member: 'jobs', decode }).catch((e: unknown) => e);
      expect(error, text).toBeInstanceOf(AnswerShapeError);
      expect((error as Error).message, text).toMatch(message);
    }
    await expect(itemsOfParsed({ jobs: 'x' }, { member: 'jobs', decode })).rejects.toThrow(AnswerShapeError);
    await expect(itemsOfParsed(null, { member: 'jobs', decode })).rejects.toThrow(AnswerShapeError);
    class RecordError extends Error {}
    const refuse = (r: unknown) => {
      if ((r as { job_id: number }).job_id === 2) throw new RecordError('cannot read job 2');
      return r;
    };
    await expect(itemsOfStream(chunksOf(JSON.stringify(body), 5), { member: 'jobs', decode: refuse })).rejects.toThrow(
      RecordError,
    );
    await expect(itemsOfParsed(structuredClone(body), { member: 'jobs', decode: refuse })).rejects.toThrow(RecordError);
  });

  it('records skipped by their bytes are seen, never parsed nor decoded', async () => {
    const decoded: unknown[] = [];
    const read = await itemsOfStream(chunksOf(JSON.stringify(body), 5), {
      member: 'jobs',
      decode: (r) => {
        decoded.push(r);
        return r;
      },
      skip: (raw) => raw.toString().startsWith('{"job_id":2'),
    });
    expect(read.seen).toBe(3);
    expect(read.items).toEqual([body.jobs[0], body.jobs[2]]);
    expect(decoded).toEqual(read.items);
  });

  it('any JSON body: the records and the rest JSON.parse gives, split at any byte', async () => {
    // A fixed sequence of pseudo-random bodies: strings holding brackets, quotes, escapes and
    // multi-byte characters, nested values and scalars as records, indented or not.
    let seed = 14;
    const next = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2147483648;
      return seed % n;
    };
    const pieces = ['a', '{', '}', '[', ']', '"', '\\', ',', ':', 'é', '\u2603', '\u0000', '😀', ' '];
    const text = () => pieces.filter(() => next(3) === 0).join('');
    const value = (depth: number): unknown => {
      switch (next(depth > 3 ? 4 : 6)) {
        case 0:
          return next(1000) - 500 + next(100) / 8;
        case 1:
          return text();
        case 2:
          return next(2) === 0 ? null : next(2) === 0;
        case 3:
          return [];
        case 4:
          return Array.from({ length: next(4) }, () => value(depth + 1));
        default:
          return Object.fromEntries(Array.from({ length: next(4) }, () => [text(), value(depth + 1)]));
      }
    };
    for (let trial = 0; trial < 300; trial++) {
      const answer = { [`${text()}x`]: value(0), jobs: Array.from({ length: next(6) }, () => value(0)), y: value(0) };
      const json = JSON.stringify(answer, null, next(2) === 0 ? undefined : 2);
      const { jobs, ...rest } = JSON.parse(json) as { jobs: unknown[] };
      const read = await itemsOfStream(chunksOf(json, 1 + next(20)), { member: 'jobs', decode: (r) => r });
      expect(read, json).toEqual({ rest, items: jobs, seen: jobs.length });
    }
  });
});
