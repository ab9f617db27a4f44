/**
 * The simulated model: a deterministic "summary" made from the facts lines of
 * the prompt (the `Label: value` lines schedflow's prompt is made of), so the
 * same prompt always gets the same answer, and tests can see which facts the
 * endpoint was given.
 */

/** Tokens as the simulator counts them: about four bytes each (an upper bound for BPE tokenizers too). */
export function countTokens(text: string): number {
  return Math.ceil(Buffer.byteLength(text, 'utf8') / 4);
}

/** Per-message overhead of the chat format, as the simulator counts it. */
export const MESSAGE_OVERHEAD_TOKENS = 4;

/** Labels whose lines make up the answer, in this order. */
const PICKED = ['Job', 'Run', 'Outcome', 'CPU', 'Memory', 'Time', 'Triage', 'Suggested change', 'Trend'];

/** JSON strings (schedflow quotes the job's own text so) as the text they hold, as a model reads them. */
function unquoted(value: string): string {
  return value.replace(/"(?:[^"\\]|\\.)*"/g, (literal) => {
    try {
      return String(JSON.parse(literal));
    } catch {
      return literal;
    }
  });
}

export function completionText(messages: readonly { role: string; content: string }[]): string {
  const user = [...messages].reverse().find((m) => m.role === 'user')?.content ?? '';
  const lines = user.split('\n').map((l) => l.trim());
  const facts: string[] = [];
  for (const label of PICKED) {
    const line = lines.find((l) => l.startsWith(`${label}:`));
    const value = line?.slice(label.length + 1).trim();
    if (value) facts.push(unquoted(value));
  }
  if (facts.length === 0) return `Summary: ${user.replace(/\s+/g, ' ').slice(0, 200)}`;
  return `Summary (simulated model): ${facts.map((f) => f.replace(/\.$/, '')).join('. ')}.`;
}

/** Cuts a text to about `maxTokens` tokens at a word boundary; says whether it had to. */
export function boundText(text: string, maxTokens: number | null): { text: string; truncated: boolean } {
  if (maxTokens === null || countTokens(text) <= maxTokens) return { text, truncated: false };
  const words = text.split(' ');
  let out = '';
  for (const word of words) {
    const next = out ? `${out} ${word}` : word;
    if (countTokens(next) > maxTokens) break;
    out = next;
  }
  return { text: out, truncated: true };
}
