import { randomBytes } from 'node:crypto';

/**
 * Reads a request body as slurmrestd's JSON reader does, which is not strict JSON: a bare `NaN`,
 * `Infinity` or `-Infinity` (in any case: `nan`, `infinity`) stands for a number. A client that
 * serialises a float badly gets its job from real slurmrestd, so the simulator must read the same
 * bodies. Strict JSON goes straight to `JSON.parse`; only a body it refuses is read again, with
 * each such bare word (outside strings) replaced by a marker string that a reviver turns back
 * into the number. The marker holds a random part, so no string a client sends can be taken for
 * one, and a marker in key position is refused as the bare word there would be.
 *
 * Throws on anything else that is not JSON, as `JSON.parse` does.
 */
export function parseLenientJson(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch (error) {
    const rewritten = markBareNumbers(text);
    if (rewritten === undefined) throw error;
    return JSON.parse(rewritten, function revive(this: unknown, key: string, value: unknown) {
      if (key.startsWith(MARKER)) throw new SyntaxError('bare word as an object key');
      if (typeof value === 'string' && value.startsWith(MARKER)) return BARE_VALUES[value.slice(MARKER.length)];
      return value;
    });
  }
}

const MARKER = `\u0000sf-bare-${randomBytes(8).toString('hex')}:`;
const BARE_VALUES: Record<string, number> = { nan: Number.NaN, infinity: Number.POSITIVE_INFINITY };
BARE_VALUES['-infinity'] = Number.NEGATIVE_INFINITY;
const BARE_WORD = /^(?:nan|-?infinity)(?![A-Za-z0-9_])/i;

/** The text with bare NaN/Infinity outside strings replaced by markers; undefined if it has none. */
function markBareNumbers(text: string): string | undefined {
  let out = '';
  let found = false;
  let i = 0;
  while (i < text.length) {
    const c = text[i];
    if (c === '"') {
      // Copy the whole string, escapes included.
      let j = i + 1;
      while (j < text.length && text[j] !== '"') j += text[j] === '\\' ? 2 : 1;
      out += text.slice(i, j + 1);
      i = j + 1;
      continue;
    }
    if (c === '-' || c === 'N' || c === 'n' || c === 'I' || c === 'i') {
      const word = BARE_WORD.exec(text.slice(i, i + 10))?.[0];
      if (word) {
        out += JSON.stringify(MARKER + word.toLowerCase());
        found = true;
        i += word.length;
        continue;
      }
    }
    out += c;
    i += 1;
  }
  return found ? out : undefined;
}
