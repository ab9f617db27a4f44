import { Worker } from 'node:worker_threads';
import { SourceError } from '../lib/yaml-source.js';
import type { LoadContext, LoadedPipeline } from './pipeline-loader.js';

/** What loading one file came to, as plain data that crosses between threads. */
export type FileOutcome = { file: string; pipeline: LoadedPipeline } | { file: string; problems: string[] };

/**
 * Loads pipeline files in a worker thread, so that parsing and checking a
 * large file (up to the limits, a few hundred milliseconds) never stalls the
 * daemon's API, polling or health checks. One short-lived thread per reload:
 * reloads are rare (a change in the folder), and a thread that is not kept
 * costs nothing between them.
 */
export function loadFilesInThread(
  files: readonly string[],
  context: LoadContext,
): Promise<Map<string, LoadedPipeline | SourceError>> {
  const worker = startThread({ files, context });
  return new Promise((resolve, reject) => {
    let settled = false;
    worker.once('message', (outcomes: FileOutcome[]) => {
      settled = true;
      resolve(new Map(outcomes.map((o) => [o.file, 'pipeline' in o ? o.pipeline : new SourceError(o.problems)])));
      void worker.terminate();
    });
    worker.once('error', (error) => {
      settled = true;
      reject(error);
    });
    worker.once('exit', (code) => {
      if (!settled) reject(new Error(`the pipeline loading thread exited (code ${code}) without an answer`));
    });
  });
}

function startThread(workerData: unknown): Worker {
  if (!import.meta.url.endsWith('.ts'))
    return new Worker(new URL('./pipeline-load-worker.js', import.meta.url), { workerData });
  // Under tsx or vitest this module is TypeScript source: the thread registers tsx before it imports its entry
  // (a worker's execArgv does not carry `--import tsx` into its module loader).
  const entry = JSON.stringify(new URL('./pipeline-load-worker.ts', import.meta.url).href);
  const code = `import('tsx/esm/api').then(({ register }) => { register(); return import(${entry}); })`;
  return new Worker(code, { eval: true, workerData });
}
