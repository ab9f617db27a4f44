import { describe, expect, it } from 'vitest';
import { answerWithin } from '../../src/lib/with-timeout.js';

describe('answerWithin', () => {
  it('gives the value of an answer in time', async () => {
    await expect(answerWithin(Promise.resolve(7), 100)).resolves.toEqual({ answered: true, value: 7 });
  });

  it('throws a refusal in time, so it is not taken for silence', async () => {
    await expect(answerWithin(Promise.reject(new Error('WRONGTYPE')), 100)).rejects.toThrow('WRONGTYPE');
  });

  it('says silence when nothing settles in time, and a later refusal goes unhandled nowhere', async () => {
    let refuse: (e: Error) => void = () => undefined;
    const late = new Promise<number>((_, reject) => {
      refuse = reject;
    });
    await expect(answerWithin(late, 20)).resolves.toEqual({ answered: false });
    refuse(new Error('too late'));
    await new Promise((r) => setTimeout(r, 10));
  });
});
