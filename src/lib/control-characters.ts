/**
 * Control characters in text that came from others (job names, the scheduler's answers, job
 * output), made visible: a terminal obeys the escape sequences in what it is given. Used by the
 * CLI's output (src/cli/terminal.ts) and the daemon's human-readable log lines (src/lib/pretty-log.ts).
 */

/**
 * C0 controls but tab and newline, a carriage return not ending a line (it rewrites the line),
 * DEL, the C1 controls (U+009B is a CSI of its own to some terminals) and the bidirectional
 * overrides and isolates (which make text read otherwise than it is).
 */
// biome-ignore lint/suspicious/noControlCharactersInRegex: matching them is the point.
const CONTROLS = /\r(?!\n)|[\x00-\x08\x0b-\x0c\x0e-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]/g;

/**
 * `text` with its control characters escaped: `\xNN` below DEL, `\uNNNN` from it on (so that
 * a JSON text stays JSON: JSON.stringify has already escaped every character below the space).
 */
export function escapeControls(text: string): string {
  return text.replace(CONTROLS, (c) => {
    const code = c.charCodeAt(0);
    return code < 0x7f ? `\\x${code.toString(16).padStart(2, '0')}` : `\\u${code.toString(16).padStart(4, '0')}`;
  });
}
