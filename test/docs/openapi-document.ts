import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import type { Queue } from 'bullmq';
import { pino } from 'pino';
import { openDatabase } from '../../src/db/database.js';
import { buildApp } from '../../src/http/app.js';
import type { QueueName } from '../../src/queue/catalog.js';
import { ClientRegistry } from '../../src/sched/client-registry.js';

/**
 * docs/openapi.json, the local API's OpenAPI document as the daemon serves it at
 * /api/v1/openapi.json, made by building the API in this process (nothing listens, no route
 * runs): `npm run docs:openapi` writes it, test/docs/openapi-document.test.ts fails when the
 * committed file differs, and test/integration/api/api-routes.test.ts checks that a running
 * daemon serves this same document. Without `--write` this prints whether the file is current.
 *
 * The document depends on the code only: no profile, port, path or host is in it (the
 * `servers` entry is relative, see src/http/app.ts), and `info.version` is package.json's.
 */

export const OPENAPI_FILE = fileURLToPath(new URL('../../docs/openapi.json', import.meta.url));

/** The document the routes declare, as pretty JSON in the order the daemon serves its members. */
export async function openApiDocumentText(): Promise<string> {
  const dir = mkdtempSync(join(tmpdir(), 'schedflow-openapi-'));
  const history = openDatabase(join(dir, 'history.db'));
  const logger = pino({ level: 'silent' });
  const unused = async (): Promise<never> => {
    throw new Error('the document is built without serving: no route runs');
  };
  const app = await buildApp({
    store: history.store,
    logger,
    profiles: new Map(),
    clients: new ClientRegistry(new Map(), logger),
    // Read only when /metrics is scraped, which never happens here.
    queues: {} as Record<QueueName, Queue>,
    submit: unused,
    resubmit: unused,
    retryTasks: unused,
    pingRedis: unused,
    settings: { rateLimitPerMin: 300, bodyLimitBytes: 1024 * 1024, pollCeilingMs: 60_000 },
  });
  try {
    await app.ready();
    return `${JSON.stringify(app.swagger(), null, 2)}\n`;
  } finally {
    await app.close();
    history.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

function current(): string | null {
  try {
    return readFileSync(OPENAPI_FILE, 'utf8');
  } catch {
    return null;
  }
}

if (process.argv[1] && import.meta.url === pathToFileURL(process.argv[1]).href) {
  const text = await openApiDocumentText();
  if (process.argv.includes('--write')) {
    writeFileSync(OPENAPI_FILE, text);
    process.stdout.write(`wrote ${OPENAPI_FILE}\n`);
  } else if (current() === text) {
    process.stdout.write(`${OPENAPI_FILE} is current\n`);
  } else {
    process.stdout.write(`${OPENAPI_FILE} is out of date: run npm run docs:openapi\n`);
    process.exitCode = 1;
  }
}
