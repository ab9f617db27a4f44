import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { ERRORS_PAGE, errorsPage } from '../docs/errors-table.js';

describe('docs/errors.md', () => {
  it('is what the error registry generates (run `npm run docs:errors` after changing src/errors.ts)', () => {
    expect(readFileSync(ERRORS_PAGE, 'utf8')).toBe(errorsPage());
  });
});
