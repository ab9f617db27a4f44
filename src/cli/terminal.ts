/**
 * What the CLI prints comes from others: job names, comments, reasons and output are whatever a
 * job's author (any user of the account, for `jobs history`) or the scheduler wrote, and a
 * terminal obeys the escape sequences in them (retitle the window, clear the screen, rewrite
 * what was printed above, or, in some terminals, type into the shell). So every line the
 * commands print goes through here, and its control characters are shown as escapes (ESC as
 * `\x1b`), keeping newlines and tabs, unless `--raw` asked for the bytes as they are.
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

let raw = false;

/** `--raw`: print what jobs and the scheduler wrote as it is, escape sequences and all. */
export function setRawOutput(on: boolean): void {
  raw = on;
}

/** Writes to stdout, control characters escaped unless `--raw`. */
export function print(text: string): void {
  process.stdout.write(raw ? text : escapeControls(text));
}

/** Writes to stderr, control characters escaped unless `--raw`: messages quote names and upstream answers too. */
export function printError(text: string): void {
  process.stderr.write(raw ? text : escapeControls(text));
}
