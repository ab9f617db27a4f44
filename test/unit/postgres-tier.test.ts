import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * `npm run test:postgres` runs the files that reach test/helpers/test-history.ts (`vitest
 * related`, package.json): that file must be the only one of the tests to read the setting, or
 * a daemon test that reads it elsewhere would never run on PostgreSQL, and nothing would say so.
 */
const REPO = fileURLToPath(new URL('../..', import.meta.url));
const MARKER = 'test/helpers/test-history.ts';

function tsFiles(dir: string): string[] {
  return readdirSync(dir, { recursive: true, encoding: 'utf8' })
    .filter((name) => name.endsWith('.ts'))
    .map((name) => relative(REPO, join(dir, name)));
}

describe('the PostgreSQL tier', () => {
  it('is chosen by the one file that reads SCHEDFLOW_TEST_HISTORY', () => {
    const readers = tsFiles(join(REPO, 'test')).filter((file) =>
      /process\.env\.SCHEDFLOW_TEST_HISTORY|process\.env\[['"]SCHEDFLOW_TEST_HISTORY/.test(
        readFileSync(join(REPO, file), 'utf8'),
      ),
    );
    expect(readers).toEqual([MARKER]);
    const pkg = JSON.parse(readFileSync(join(REPO, 'package.json'), 'utf8')) as { scripts: Record<string, string> };
    expect(pkg.scripts['test:postgres']).toContain(`related --run ${MARKER}`);
  });
});
