import { describe, expect, it } from 'vitest';
import { chunkJobIds, MAX_ID_QUERY_BYTES, MAX_IDS_IN_QUERY } from '../../src/sched/client.js';

const ids = (count: number, first: number) => Array.from({ length: count }, (_, i) => first + i);
const queryBytes = (chunk: number[], param: string) => chunk.map((id) => `${param}=${id}&`).join('').length;

describe('chunkJobIds', () => {
  it('names every id once, in order, in the fewest chunks', () => {
    const all = ids(1234, 1000);
    const chunks = chunkJobIds(all, 'job_id');
    expect(chunks.flat()).toEqual(all);
    expect(chunks.map((c) => c.length)).toEqual([500, 500, 234]);
    expect(chunkJobIds([], 'step')).toEqual([]);
  });

  it.each([
    ['job_id', 25_110_001, 375],
    ['step', 25_110_001, 428],
    ['job_id', 4_000_000_000, 333],
    ['step', 4_000_000_000, 375],
  ] as const)('%s with ids like %d: %d a chunk, within the byte budget', (param, first, size) => {
    const chunks = chunkJobIds(ids(2000, first), param);
    expect(chunks[0]).toHaveLength(size);
    for (const chunk of chunks) {
      expect(chunk.length).toBeLessThanOrEqual(MAX_IDS_IN_QUERY);
      expect(queryBytes(chunk, param)).toBeLessThanOrEqual(MAX_ID_QUERY_BYTES);
    }
  });
});
