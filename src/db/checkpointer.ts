import { createRequire } from 'node:module';
import { Worker } from 'node:worker_threads';
import type { Logger } from '../logger.js';
import { connectionOf, type HistoryDatabase } from './database.js';

/** How often the thread copies the write-ahead log into the database file. */
export const CHECKPOINT_EVERY_MS = 1000;

/** SQLite's own default, put back when the thread is gone. */
const AUTOCHECKPOINT_PAGES = 1000;

/**
 * The history's checkpoints, run by a thread of their own on a connection of their own. SQLite
 * runs one in whichever commit brings the write-ahead log past 1,000 pages, and a checkpoint
 * ends with an fsync of the log and of the database: on a busy disk, a commit that cost 2 ms
 * of CPU held the event loop (the API, `/healthz`, every worker) 170-210 ms (issue 14). Passive:
 * it never waits for a writer or a reader, and a commit of the daemon never waits for it.
 */
export interface Checkpointer {
  /** Stops the thread (its connection closed); the daemon's own connection checkpoints again. */
  stop(): Promise<void>;
}

// CommonJS, evaluated: no module of the package to load in the thread (under tsx, in tests).
const THREAD = `
const { parentPort, workerData } = require('node:worker_threads');
const Database = require(workerData.driver);
const db = new Database(workerData.file, { fileMustExist: true });
db.pragma('busy_timeout = 5000');
let failures = 0;
const timer = setInterval(() => {
  try {
    db.pragma('wal_checkpoint(PASSIVE)');
    failures = 0;
  } catch (error) {
    // Reported once per run of failures: the daemon's log, not the thread's.
    if (failures++ === 0) parentPort.postMessage({ failed: String(error && error.message || error) });
  }
}, workerData.everyMs);
parentPort.on('message', () => {
  clearInterval(timer);
  db.close();
  parentPort.close();
});
`;

export function startCheckpointer(
  history: HistoryDatabase,
  logger: Logger,
  everyMs = CHECKPOINT_EVERY_MS,
): Checkpointer {
  const connection = connectionOf(history.db);
  const worker = new Worker(THREAD, {
    eval: true,
    workerData: { driver: createRequire(import.meta.url).resolve('better-sqlite3'), file: history.file, everyMs },
  });
  // Only while the thread runs: a log that nobody copies back would grow without bound.
  connection.pragma('wal_autocheckpoint = 0');
  let running = true;
  const exited = new Promise<void>((resolve) => {
    worker.once('exit', () => {
      running = false;
      if (connection.open) connection.pragma(`wal_autocheckpoint = ${AUTOCHECKPOINT_PAGES}`);
      resolve();
    });
  });
  worker.on('message', (message: { failed?: string }) => {
    if (message.failed) logger.warn({ err: message.failed }, 'history checkpoint failed; retrying every second');
  });
  worker.on('error', (error) =>
    logger.warn({ err: error }, 'history checkpoint thread failed; commits checkpoint again'),
  );
  worker.unref();
  return {
    stop: async () => {
      if (running) worker.postMessage('stop');
      await exited;
    },
  };
}
