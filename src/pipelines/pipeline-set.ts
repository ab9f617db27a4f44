import { statSync } from 'node:fs';
import { dirname, resolve } from 'node:path';
import { SourceError } from '../lib/yaml-source.js';
import { type LoadContext, type LoadedPipeline, loadPipelineFile } from './pipeline-loader.js';
import { loadFilesInThread } from './pipeline-thread.js';
import { upstreamProblems } from './upstream-links.js';

/** One file of a set: loaded, or why not. */
export type FileLoad =
  | { file: string; pipeline: LoadedPipeline; error: null }
  | { file: string; pipeline: null; error: SourceError };

export interface PipelineSetLoad {
  /** In the order the files were given. */
  results: FileLoad[];
  /** The files read and checked this time; the others came unchanged from the cache. */
  checked: string[];
}

/**
 * Loaded pipelines by file with what they were read from, so a reload skips a
 * file that has not changed: parsing and checking every file again on each
 * change in the folder is the expensive part of a reload. Only successful
 * loads are kept: a failing file is checked again each time, since what it
 * lacked (a script file, say) may have appeared without the file changing.
 */
export class PipelineCache {
  readonly #entries = new Map<string, { key: string; pipeline: LoadedPipeline }>();

  get(file: string): LoadedPipeline | undefined {
    const entry = this.#entries.get(file);
    if (!entry) return undefined;
    if (entry.key === `${statKey(file)}|${scriptsKey(entry.pipeline)}`) return entry.pipeline;
    this.#entries.delete(file);
    return undefined;
  }

  /** `fileKey`: the file's statKey taken before it was read, so an edit during the load is not mistaken for what was read. */
  set(file: string, pipeline: LoadedPipeline, fileKey: string): void {
    this.#entries.set(file, { key: `${fileKey}|${scriptsKey(pipeline)}`, pipeline });
  }

  /** Forgets the files not in `files` (removed from the folder). */
  keepOnly(files: ReadonlySet<string>): void {
    for (const file of this.#entries.keys()) if (!files.has(file)) this.#entries.delete(file);
  }
}

/**
 * Modification time and size: a stat per file instead of a read, so an
 * unchanged folder costs almost nothing.
 */
function statKey(path: string): string {
  try {
    const { mtimeMs, size } = statSync(path);
    return `${mtimeMs}:${size}`;
  } catch {
    return 'missing';
  }
}

/** Script files count too: their text is checked at load. */
function scriptsKey(pipeline: LoadedPipeline): string {
  const keys: string[] = [];
  for (const step of Object.values(pipeline.def.steps)) {
    if (step.script_file) keys.push(statKey(resolve(dirname(pipeline.file), step.script_file)));
  }
  return keys.join('|');
}

/** Below this many bytes in all, files are checked on the calling thread: starting a thread costs more than they do. */
const IN_THREAD_BYTES = 64 * 1024;

/**
 * Loads a folder's pipeline files as one set: each file's checks, then the
 * checks between files (a pipeline name used by two files, such as `x.yaml`
 * and `x.yml`, is an error in both: which one the daemon would pick must not
 * depend on the order files are read). `schedflow validate`, `schedflow
 * pipelines` and the daemon's registry all load through here, so they cannot
 * disagree about a file. This one is for the CLI: it blocks while it reads.
 */
export function loadPipelineSet(
  files: readonly string[],
  context: LoadContext,
  cache?: PipelineCache,
): PipelineSetLoad {
  const pending = uncached(files, cache);
  return setFrom(files, pending, new Map(pending.wanted.map((f) => [f, loadOne(f, context)])), cache);
}

/**
 * The same, for the daemon: files not in the cache are read and checked in a
 * worker thread (unless they are small), so a reload never stalls the API.
 */
export async function loadPipelineSetAsync(
  files: readonly string[],
  context: LoadContext,
  cache: PipelineCache,
): Promise<PipelineSetLoad> {
  const pending = uncached(files, cache);
  const { wanted } = pending;
  const bytes = wanted.reduce((sum, f) => sum + sizeOf(f), 0);
  const loaded =
    bytes <= IN_THREAD_BYTES
      ? new Map(wanted.map((f) => [f, loadOne(f, context)]))
      : await loadFilesInThread(wanted, context);
  return setFrom(files, pending, loaded, cache);
}

interface Pending {
  /** The files to read and check. */
  wanted: string[];
  /** Each wanted file's statKey, taken before it is read, so an edit during the load is not mistaken for what was read. */
  fileKeys: Map<string, string>;
  cached: Map<string, LoadedPipeline>;
}

function uncached(files: readonly string[], cache?: PipelineCache): Pending {
  const cached = new Map<string, LoadedPipeline>();
  for (const file of files) {
    const pipeline = cache?.get(file);
    if (pipeline) cached.set(file, pipeline);
  }
  const wanted = files.filter((f) => !cached.has(f));
  return { wanted, fileKeys: new Map(wanted.map((f) => [f, statKey(f)])), cached };
}

function loadOne(file: string, context: LoadContext): LoadedPipeline | SourceError {
  try {
    return loadPipelineFile(file, context);
  } catch (error) {
    if (error instanceof SourceError) return error;
    throw error;
  }
}

function sizeOf(path: string): number {
  try {
    return statSync(path).size;
  } catch {
    return 0;
  }
}

function setFrom(
  files: readonly string[],
  { cached, fileKeys }: Pending,
  loaded: ReadonlyMap<string, LoadedPipeline | SourceError>,
  cache?: PipelineCache,
): PipelineSetLoad {
  const results = files.map((file): FileLoad => {
    const outcome = cached.get(file) ?? loaded.get(file) ?? new SourceError([`${file}: was not loaded`]);
    if (outcome instanceof SourceError) return { file, pipeline: null, error: outcome };
    if (!cached.has(file)) cache?.set(file, outcome, fileKeys.get(file) ?? 'missing');
    return { file, pipeline: outcome, error: null };
  });
  cache?.keepOnly(new Set(files));

  const byName = new Map<string, string[]>();
  for (const r of results) {
    if (r.pipeline) byName.set(r.pipeline.name, [...(byName.get(r.pipeline.name) ?? []), r.file]);
  }
  const named = results.map((r): FileLoad => {
    const users = r.pipeline ? (byName.get(r.pipeline.name) ?? []) : [];
    if (!r.pipeline || users.length < 2) return r;
    const others = users.filter((f) => f !== r.file).join(', ');
    const message = `${r.file}: pipeline name "${r.pipeline.name}" is also used by ${others}: give each file its own name (name:) or file name`;
    return { file: r.file, pipeline: null, error: new SourceError([message]) };
  });
  // Between the files that passed: `on:` names pipelines of this folder (upstream-links.ts).
  const linked = upstreamProblems(named.flatMap((r) => (r.pipeline ? [r.pipeline] : [])));
  return {
    checked: [...loaded.keys()],
    results: named.map((r): FileLoad => {
      const problems = linked.get(r.file);
      return problems ? { file: r.file, pipeline: null, error: new SourceError(problems) } : r;
    }),
  };
}
