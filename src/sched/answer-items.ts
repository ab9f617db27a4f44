import { setImmediate as nextTurn } from 'node:timers/promises';
import { JSONParser } from '@streamparser/json';

/**
 * The records of a list answer (`jobs` of a job listing or of accounting), decoded one by one
 * as they are read, so that neither the raw body nor every raw record is ever held whole (issue
 * 14: 10,000 accounting records are about 40 MB of JSON; `JSON.parse` held the daemon 300 ms on
 * them and kept the text and the parsed tree alive together).
 */
export interface ItemsOf<T> {
  /** The top-level member holding the records. */
  member: string;
  /** The record as schedflow keeps it; undefined to leave it out (a job not asked about). */
  decode: (raw: unknown) => T | undefined;
}

export interface ReadItems<T> {
  /** The answer without its records (meta, errors, warnings, last_update…). */
  rest: Record<string, unknown>;
  items: T[];
  /** Records the answer held, kept or not. */
  seen: number;
}

/** Longest stretch of parsing or decoding between turns of the event loop. */
const ITEMS_SLICE_MS = 20;

/**
 * Above this size an answer is parsed as it arrives. Below it, `JSON.parse` (about 8 ms a MB
 * here) blocks for little and costs a quarter of the streaming parser's CPU or less: a chunk of
 * 375 accounting records named by the poller is about 1.5 MB.
 */
export const STREAM_ABOVE_BYTES = 4 * 1024 * 1024;

/** Bytes handed to the parser at once. */
const WRITE_BYTES = 8192;

/** A body that is not JSON, or has no array under `member`. */
export class AnswerShapeError extends Error {}

/** Decodes the records of an answer already parsed, yielding every ITEMS_SLICE_MS. */
export async function itemsOfParsed<T>(body: unknown, of: ItemsOf<T>): Promise<ReadItems<T>> {
  if (body === null || typeof body !== 'object' || Array.isArray(body)) {
    throw new AnswerShapeError(`answered without a "${of.member}" array`);
  }
  const { [of.member]: raw, ...rest } = body as Record<string, unknown>;
  if (!Array.isArray(raw)) throw new AnswerShapeError(`answered without a "${of.member}" array`);
  const items: T[] = [];
  let sliceStart = performance.now();
  for (const record of raw) {
    if (performance.now() - sliceStart > ITEMS_SLICE_MS) {
      await nextTurn();
      sliceStart = performance.now();
    }
    const item = of.decode(record);
    if (item !== undefined) items.push(item);
  }
  return { rest, items, seen: raw.length };
}

/**
 * Parses a body as its chunks come, decoding each record of `member` as soon as it is complete
 * and dropping it raw. Errors of the stream itself (a reset connection) are thrown as they
 * are; a body that is not JSON as AnswerShapeError; a record `decode` refuses as `decode` threw.
 */
export async function itemsOfStream<T>(chunks: AsyncIterable<Uint8Array>, of: ItemsOf<T>): Promise<ReadItems<T>> {
  const member = `$.${of.member}`;
  // Records are emitted (and dropped from the tree) alone; the other top-level members whole.
  const parser = new JSONParser({ paths: [`${member}.*`, '$.*'], keepStack: false, stringBufferSize: 65_536 });
  const rest: Record<string, unknown> = {};
  const items: T[] = [];
  let seen = 0;
  let sawMember = false;
  // Set by the callback: a decoder's error, told from the parser's own.
  const refused: { error?: unknown } = {};
  parser.onValue = ({ value, key, parent, stack }) => {
    if (stack.length === 2 && stack[1]?.key === of.member) {
      seen++;
      let item: T | undefined;
      try {
        item = of.decode(value);
      } catch (error) {
        refused.error = error;
        throw error;
      }
      if (item !== undefined) items.push(item);
      // Not kept in the array the parser is building.
      if (Array.isArray(parent)) parent.pop();
      return;
    }
    if (stack.length === 1 && typeof key === 'string') {
      if (key === of.member) sawMember = Array.isArray(value);
      else rest[key] = value;
    }
  };
  let sliceStart = performance.now();
  for await (const chunk of chunks) {
    // A socket's chunk can be 64 KB: 40 ms of parsing on a busy machine.
    for (let at = 0; at < chunk.length; at += WRITE_BYTES) {
      try {
        parser.write(chunk.subarray(at, at + WRITE_BYTES));
      } catch (error) {
        if ('error' in refused) throw refused.error;
        throw new AnswerShapeError(`answered invalid JSON (${(error as Error).message})`);
      }
      if (performance.now() - sliceStart > ITEMS_SLICE_MS) {
        await nextTurn();
        sliceStart = performance.now();
      }
    }
  }
  if (!parser.isEnded) {
    try {
      parser.end();
    } catch (error) {
      throw new AnswerShapeError(`answered truncated JSON (${(error as Error).message})`);
    }
  }
  if (!sawMember) throw new AnswerShapeError(`answered without a "${of.member}" array`);
  return { rest, items, seen };
}
