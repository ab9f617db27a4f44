import { describe, expect, it } from 'vitest';
import { escapeControls } from '../../src/cli/terminal.js';

describe('escapeControls (what the CLI prints)', () => {
  it('shows escape sequences as text, keeping newlines, tabs and line-ending CRs', () => {
    expect(escapeControls('a\x1b]0;pwned\x07b\x1b[2Jc')).toBe('a\\x1b]0;pwned\\x07b\\x1b[2Jc');
    expect(escapeControls('col1\tcol2\nline\r\nnext')).toBe('col1\tcol2\nline\r\nnext');
    expect(escapeControls('50%\r100%\x08\x00')).toBe('50%\\x0d100%\\x08\\x00');
  });

  it('writes DEL, C1 controls and bidirectional overrides as \\uNNNN, so JSON stays JSON', () => {
    const value = { name: 'x\x7f\u009b31m\u202eexe.txt', plain: 'naïve ✓' };
    const printed = escapeControls(JSON.stringify(value));
    expect(printed).toBe('{"name":"x\\u007f\\u009b31m\\u202eexe.txt","plain":"naïve ✓"}');
    expect(JSON.parse(printed)).toEqual(value);
  });
});
