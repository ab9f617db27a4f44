import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';

/**
 * docs/http-api.md lists the examples in full, to be copied from the page; the files are what
 * the suite runs (test/integration/api/api-examples.test.ts). The listings must be the files.
 */

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const read = (path: string) => readFileSync(`${ROOT}/${path}`, 'utf8');

/** The fenced block of `language` right under `heading` (its text, ending in a newline). */
function listingUnder(markdown: string, heading: string, language: string): string | undefined {
  const at = markdown.indexOf(`\n${heading}\n`);
  if (at < 0) return undefined;
  const open = `\`\`\`${language}\n`;
  const start = markdown.indexOf(open, at);
  const nextHeading = markdown.indexOf('\n#', at + heading.length + 2);
  if (start < 0 || (nextHeading >= 0 && nextHeading < start)) return undefined;
  const end = markdown.indexOf('\n```\n', start);
  return end < 0 ? undefined : markdown.slice(start + open.length, end + 1);
}

describe('the examples of docs/http-api.md', () => {
  const page = read('docs/http-api.md');
  it.each([
    ['### Python (`requests`)', 'python', 'examples/python/submit_and_wait.py'],
    ['### Shell (`curl` and `jq`)', 'sh', 'examples/shell/submit-and-wait.sh'],
  ])('%s lists %s as it is', (heading, language, file) => {
    expect(listingUnder(page, heading, language), `${heading} in docs/http-api.md`).toBe(read(file));
  });
});
