import { readFileSync, writeFileSync } from 'node:fs';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { ERROR_CODES, type ErrorSpec } from '../../src/errors.js';

/**
 * docs/errors.md, generated from the error registry (src/errors.ts) so the page cannot drift
 * from the code: `npm run docs:errors` writes it, test/unit/errors-doc.test.ts fails when the
 * committed page differs. Without `--write` this prints whether the page is current.
 */

export const ERRORS_PAGE = fileURLToPath(new URL('../../docs/errors.md', import.meta.url));

const INTRO = `# Error codes

<!-- Generated from src/errors.ts by \`npm run docs:errors\`; edit the registry, not this page. -->

Every error schedflow reports has a stable code starting \`SCHEDFLOW_ERR_\`. The local API
answers an error as JSON \`{ "error": { "code": …, "message": … } }\` with the status below;
summaries and webhook deliveries record the code of their last failure, and log lines carry
it as \`code\`.

- **HTTP status**: what the local API answers. A scheduler error (\`SCHEDFLOW_ERR_SCHED_…\`)
  is answered as \`SCHEDFLOW_ERR_UPSTREAM\` with this status, its own code in
  \`upstream.code\` and the scheduler's status and message beside it. "—": the code is only
  recorded or logged, never an answer (one reaching a route anyway is a 503 when retryable,
  else a 500 \`SCHEDFLOW_ERR_INTERNAL\`).
- **Retryable**: whether the same call may succeed later. schedflow retries these itself
  (with backoff and jitter, never sooner than the upstream's Retry-After); a client of the
  API may too, after the answer's \`Retry-After\` when it has one.
- Commands exit with 2 for a mistake to fix (configuration, input, the request named), 4 for
  a retryable error, 3 for another refusal and 1 for an internal error.
`;

function cell(text: string): string {
  return text.replace(/\|/g, '\\|');
}

function statusOf(spec: ErrorSpec): string {
  if (spec.status === null) return '—';
  return spec.unreachableStatus === undefined ? String(spec.status) : `${spec.status} / ${spec.unreachableStatus}`;
}

function retryableOf(spec: ErrorSpec): string {
  const word = (retryable: boolean) => (retryable ? 'yes' : 'no');
  return spec.unreachableStatus === undefined ? word(spec.retryable) : `${word(spec.retryable)} / yes`;
}

/** The whole page, as the registry says it today. */
export function errorsPage(): string {
  const rows = Object.entries(ERROR_CODES).map(([code, spec]: [string, ErrorSpec]) => [
    `\`${code}\``,
    statusOf(spec),
    retryableOf(spec),
    cell(spec.what),
  ]);
  return `${INTRO}\n${table(['Code', 'HTTP status', 'Retryable', 'What to do'], rows)}`;
}

/** A Markdown table with its columns padded, as the formatter (biome) writes it. */
function table(head: string[], rows: string[][]): string {
  const widths = head.map((title, i) => Math.max(title.length, ...rows.map((row) => row[i]?.length ?? 0)));
  const line = (cells: string[]) => `| ${cells.map((text, i) => text.padEnd(widths[i] ?? 0)).join(' | ')} |\n`;
  return [head, widths.map((width) => '-'.repeat(width)), ...rows].map(line).join('');
}

function current(): string | null {
  try {
    return readFileSync(ERRORS_PAGE, 'utf8');
  } catch {
    return null;
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const page = errorsPage();
  if (process.argv.includes('--write')) {
    writeFileSync(ERRORS_PAGE, page);
    process.stdout.write(`wrote ${ERRORS_PAGE}\n`);
  } else if (current() === page) {
    process.stdout.write(`${ERRORS_PAGE} is current\n`);
  } else {
    process.stderr.write(`${ERRORS_PAGE} differs from the registry: run npm run docs:errors\n`);
    process.exitCode = 1;
  }
}
