import { parentPort, workerData } from 'node:worker_threads';
import { SourceError } from '../lib/yaml-source.js';
import { type LoadContext, loadPipelineFile } from './pipeline-loader.js';
import type { FileOutcome } from './pipeline-thread.js';

/**
 * Runs in a worker thread: reads and checks the files it is given and posts
 * back what came of each. Only plain data crosses (a SourceError's problems,
 * not the error), so the main thread rebuilds the errors.
 */
const { files, context } = workerData as { files: string[]; context: LoadContext };
const outcomes: FileOutcome[] = files.map((file) => {
  try {
    return { file, pipeline: loadPipelineFile(file, context) };
  } catch (error) {
    if (error instanceof SourceError) return { file, problems: error.problems };
    return { file, problems: [`${file}: could not be loaded: ${(error as Error).message}`] };
  }
});
parentPort?.postMessage(outcomes);
