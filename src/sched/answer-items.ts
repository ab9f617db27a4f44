import { assertNever } from '../lib/assert-never.js';
import { nextTurn } from '../lib/turns.js';

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
  /**
   * Records to leave out before they are even parsed, told by their bytes (reconcile's records
   * already stored as they are). Given, the answer is scanned whatever its size.
   */
  skip?: (raw: Buffer) => boolean;
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
 * Above this size an answer is parsed as it arrives, a slice at a time. Below it, `JSON.parse`
 * (about 8 ms a MB here) blocks for little, and is a fifth cheaper than scanning the bytes
 * first. It was 4 MB while the streaming parser cost five times as much: the poller's chunks of
 * accounting records (375 are about 1.5 MB) were parsed whole, 30 to 50 ms at once.
 */
export const STREAM_ABOVE_BYTES = 512 * 1024;

/** Bytes scanned between looks at the clock. */
const WRITE_BYTES = 65_536;

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
 *
 * The bytes are only scanned for where each record (and each other top-level member) begins
 * and ends; each is then read by `JSON.parse`. A streaming JSON parser building every value
 * token by token cost five times `JSON.parse`'s CPU: reconcile's answers of thousands of records
 * were a tenth of what the daemon spent during a stream of submissions (issue 14).
 */
export async function itemsOfStream<T>(chunks: AsyncIterable<Uint8Array>, of: ItemsOf<T>): Promise<ReadItems<T>> {
  const scanner = new MemberScanner(of);
  let sliceStart = performance.now();
  for await (const chunk of chunks) {
    const bytes = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk.buffer, chunk.byteOffset, chunk.byteLength);
    // A socket's chunk can be 64 KB or more: records are decoded as they are found.
    for (let at = 0; at < bytes.length; at += WRITE_BYTES) {
      scanner.write(bytes.subarray(at, at + WRITE_BYTES));
      if (performance.now() - sliceStart > ITEMS_SLICE_MS) {
        await nextTurn();
        sliceStart = performance.now();
      }
    }
  }
  return scanner.end();
}

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_OBJECT = 0x7b;
const CLOSE_OBJECT = 0x7d;
const OPEN_ARRAY = 0x5b;
const CLOSE_ARRAY = 0x5d;
const COMMA = 0x2c;
const COLON = 0x3a;

function isSpace(byte: number): boolean {
  return byte === 0x20 || byte === 0x0a || byte === 0x0d || byte === 0x09;
}

/** Where the scanner is in the top-level object (outside the value being collected). */
type At =
  | 'start' // before the top-level `{`
  | 'key' // before a member's name, or the `}` of an empty object
  | 'next-key' // before a member's name, after a comma
  | 'colon'
  | 'value'
  | 'after-value' // before `,` or `}`
  | 'item' // before a record, or the `]` of an empty list
  | 'next-item' // before a record, after a comma
  | 'after-item' // before `,` or `]`
  | 'end';

/**
 * Splits a top-level object into its members, and the array under `member` into its records,
 * by scanning bytes for strings and brackets only. A value is collected (across chunks) until
 * it closes, then parsed whole: a record is decoded and dropped, another member kept in `rest`.
 */
class MemberScanner<T> {
  private at: At = 'start';
  /** What is being collected: a member's name, another member's value, or a record. */
  private collecting: 'key' | 'value' | 'item' | null = null;
  /** Bytes of the collected text from earlier chunks. */
  private parts: Buffer[] = [];
  /** Open brackets within the collected value; a scalar has none and ends at a delimiter. */
  private depth = 0;
  private scalar = false;
  private inString = false;
  private escaped = false;
  private key = '';
  private sawMember = false;
  private readonly rest: Record<string, unknown> = {};
  private readonly items: T[] = [];
  private seen = 0;

  constructor(private readonly of: ItemsOf<T>) {}

  write(bytes: Buffer): void {
    let i = 0;
    const n = bytes.length;
    while (i < n) {
      if (this.collecting !== null) {
        const end = this.scan(bytes, i);
        if (end === -1) {
          this.parts.push(bytes.subarray(i));
          return;
        }
        this.finish(bytes, i, end);
        i = end;
        continue;
      }
      const byte = bytes[i] as number;
      if (isSpace(byte)) {
        i++;
        continue;
      }
      switch (this.at) {
        case 'start':
          if (byte !== OPEN_OBJECT) {
            if (byte === OPEN_ARRAY) throw this.withoutMember();
            throw invalid(`unexpected "${String.fromCharCode(byte)}"`);
          }
          this.at = 'key';
          break;
        case 'key':
        case 'next-key':
          if (byte === CLOSE_OBJECT && this.at === 'key') this.at = 'end';
          else if (byte === QUOTE) this.begin('key', false);
          else throw invalid(`expected a member name, got "${String.fromCharCode(byte)}"`);
          break;
        case 'colon':
          if (byte !== COLON) throw invalid(`expected ":", got "${String.fromCharCode(byte)}"`);
          this.at = 'value';
          break;
        case 'value':
          if (this.key === this.of.member && byte === OPEN_ARRAY) {
            this.sawMember = true;
            this.at = 'item';
          } else {
            this.startValue('value', byte);
            // Read again as the value's first byte.
            continue;
          }
          break;
        case 'after-value':
          if (byte === COMMA) this.at = 'next-key';
          else if (byte === CLOSE_OBJECT) this.at = 'end';
          else throw invalid(`expected "," or "}", got "${String.fromCharCode(byte)}"`);
          break;
        case 'item':
        case 'next-item':
          if (byte === CLOSE_ARRAY && this.at === 'item') this.at = 'after-value';
          else {
            this.startValue('item', byte);
            continue;
          }
          break;
        case 'after-item':
          if (byte === COMMA) this.at = 'next-item';
          else if (byte === CLOSE_ARRAY) this.at = 'after-value';
          else throw invalid(`expected "," or "]", got "${String.fromCharCode(byte)}"`);
          break;
        case 'end':
          throw invalid('text after the end');
        default:
          assertNever(this.at);
      }
      i++;
    }
  }

  end(): ReadItems<T> {
    if (this.at === 'start') throw invalid('empty body');
    if (this.at !== 'end' || this.collecting !== null) {
      throw new AnswerShapeError('answered truncated JSON (the body ends before the answer does)');
    }
    if (!this.sawMember) throw this.withoutMember();
    return { rest: this.rest, items: this.items, seen: this.seen };
  }

  private withoutMember(): AnswerShapeError {
    return new AnswerShapeError(`answered without a "${this.of.member}" array`);
  }

  private startValue(what: 'value' | 'item', byte: number): void {
    if (byte === COMMA || byte === COLON || byte === CLOSE_ARRAY || byte === CLOSE_OBJECT) {
      throw invalid(`unexpected "${String.fromCharCode(byte)}"`);
    }
    this.begin(what, byte !== QUOTE && byte !== OPEN_OBJECT && byte !== OPEN_ARRAY);
  }

  private begin(what: 'key' | 'value' | 'item', scalar: boolean): void {
    this.collecting = what;
    this.parts = [];
    this.depth = 0;
    this.scalar = scalar;
    this.inString = false;
    this.escaped = false;
  }

  /**
   * Scans the collected value from `i`: the offset just past its end, or -1 when it goes on
   * in the next chunk. A scalar ends before its delimiter; a string or container after its close.
   */
  private scan(bytes: Buffer, i: number): number {
    const n = bytes.length;
    if (this.collecting === 'key') {
      // The opening quote was read by write(): the name runs to the closing one.
      this.inString = true;
      this.depth = 0;
    }
    if (this.scalar) {
      for (; i < n; i++) {
        const byte = bytes[i] as number;
        if (byte === COMMA || byte === CLOSE_OBJECT || byte === CLOSE_ARRAY || isSpace(byte)) return i;
      }
      return -1;
    }
    let { depth, inString, escaped } = this;
    for (; i < n; i++) {
      const byte = bytes[i] as number;
      if (inString) {
        if (escaped) escaped = false;
        else if (byte === BACKSLASH) escaped = true;
        else if (byte === QUOTE) {
          inString = false;
          if (depth === 0) return this.save(i + 1, depth, inString, escaped);
        }
      } else if (byte === QUOTE) inString = true;
      else if (byte === OPEN_OBJECT || byte === OPEN_ARRAY) depth++;
      else if (byte === CLOSE_OBJECT || byte === CLOSE_ARRAY) {
        depth--;
        if (depth === 0) return this.save(i + 1, depth, inString, escaped);
      }
    }
    this.save(-1, depth, inString, escaped);
    return -1;
  }

  private save(result: number, depth: number, inString: boolean, escaped: boolean): number {
    this.depth = depth;
    this.inString = inString;
    this.escaped = escaped;
    return result;
  }

  /** The collected value, from `start` to `end` of this chunk after the parts before it. */
  private finish(bytes: Buffer, start: number, end: number): void {
    const what = this.collecting;
    const raw =
      this.parts.length === 0 ? bytes.subarray(start, end) : Buffer.concat([...this.parts, bytes.subarray(start, end)]);
    this.parts = [];
    this.collecting = null;
    if (what === 'item' && this.of.skip?.(raw)) {
      this.seen++;
      this.at = 'after-item';
      return;
    }
    const text = raw.toString('utf8');
    if (what === 'key') {
      this.key = parse(`"${text}`) as string;
      this.at = 'colon';
      return;
    }
    const value = parse(text);
    if (what === 'value') {
      if (this.key !== this.of.member) this.rest[this.key] = value;
      this.at = 'after-value';
      return;
    }
    this.seen++;
    const item = this.of.decode(value);
    if (item !== undefined) this.items.push(item);
    this.at = 'after-item';
  }
}

function parse(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (error) {
    throw invalid((error as Error).message);
  }
}

function invalid(why: string): AnswerShapeError {
  return new AnswerShapeError(`answered invalid JSON (${why})`);
}
