/**
 * What the CLI prints comes from others: job names, comments, reasons and output are whatever a
 * job's author (any user of the account, for `jobs history`) or the scheduler wrote, and a
 * terminal obeys the escape sequences in them (retitle the window, clear the screen, rewrite
 * what was printed above, or, in some terminals, type into the shell). So every line the
 * commands print goes through here, and its control characters are shown as escapes (ESC as
 * `\x1b`), keeping newlines and tabs, unless `--raw` asked for the bytes as they are.
 */

import { escapeControls } from '../lib/control-characters.js';

export { escapeControls };

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
