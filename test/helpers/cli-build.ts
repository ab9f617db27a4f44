import { type ChildProcess, spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { TestProject } from 'vitest/node';

/**
 * A vitest globalSetup: builds `schedflow` once per run (the project's own build, `tsc -p
 * tsconfig.build.json`, without its type check, which `npm test` runs before the tests), so the
 * tests start the CLI and the daemon as `node <build>/src/cli.js`, as `npm start` does, rather
 * than through tsx. Through tsx each start spent about a second of CPU on its loader
 * (`schedflow --version` 4 s against 1.2 s built; `jobs list` 2.5 s against 0.8 s), and the
 * suite starts the CLI over a hundred times.
 *
 * The build is kept under `.tmp/cli-build/<hash of the sources>`, so a run on unchanged sources
 * starts at once. It runs in the background: the files that start the CLI wait for it in a
 * `beforeAll` (test/helpers/cli-process.ts), the others need not. No `vitest` import here: a
 * globalSetup runs in vitest's own process.
 */

export interface CliBuild {
  /** The build's root once complete: `<dir>/src/cli.js` is the entry point. */
  dir: string;
  /** Written with tsc's output when the build fails. */
  errorFile: string;
}

declare module 'vitest' {
  export interface ProvidedContext {
    cliBuild: CliBuild;
  }
}

const REPO = fileURLToPath(new URL('../../', import.meta.url));
const CACHE = join(REPO, '.tmp', 'cli-build');
/** What the build reads: a change to any of it is a new build. */
const INPUTS = ['src', 'workers', 'tsconfig.json', 'tsconfig.build.json', 'package.json'];
/** Marks a build as complete; written before the build's folder gets its final name. */
export const COMPLETE = '.complete';
/** Builds of other sources older than this are removed. */
const KEEP_MS = 24 * 3600_000;

function sourcesHash(): string {
  const hash = createHash('sha256');
  const add = (path: string) => {
    if (statSync(path).isDirectory()) {
      for (const entry of readdirSync(path).sort()) add(join(path, entry));
    } else {
      hash.update(relative(REPO, path)).update('\0').update(readFileSync(path)).update('\0');
    }
  };
  for (const input of INPUTS) add(join(REPO, input));
  return hash.digest('hex').slice(0, 16);
}

function pruneOldBuilds(keep: string): void {
  for (const entry of existsSync(CACHE) ? readdirSync(CACHE) : []) {
    const path = join(CACHE, entry);
    if (entry !== keep && Date.now() - statSync(path).mtimeMs > KEEP_MS) rmSync(path, { recursive: true, force: true });
  }
}

interface RunningBuild extends CliBuild {
  child: ChildProcess | null;
}

/** One build per vitest process, however many projects name this globalSetup. */
const KEY = Symbol.for('schedflow.test.cliBuild');

function startBuild(): RunningBuild {
  const memo = (globalThis as Record<symbol, RunningBuild | undefined>)[KEY];
  if (memo) return memo;
  const hash = sourcesHash();
  const dir = join(CACHE, hash);
  const partial = join(CACHE, `${hash}.partial-${process.pid}`);
  const build: RunningBuild = { dir, errorFile: `${partial}.error`, child: null };
  (globalThis as Record<symbol, RunningBuild | undefined>)[KEY] = build;
  if (existsSync(join(dir, COMPLETE))) return build;
  mkdirSync(CACHE, { recursive: true });
  pruneOldBuilds(hash);
  rmSync(build.errorFile, { force: true });
  const tsc = createRequire(join(REPO, 'package.json')).resolve('typescript/bin/tsc');
  const args = [tsc, '-p', 'tsconfig.build.json', '--noCheck', '--outDir', partial, '--sourceMap', 'false'];
  const child = spawn(process.execPath, args, { cwd: REPO, stdio: ['ignore', 'pipe', 'pipe'] });
  build.child = child;
  let output = '';
  child.stdout.setEncoding('utf8').on('data', (chunk: string) => {
    output += chunk;
  });
  child.stderr.setEncoding('utf8').on('data', (chunk: string) => {
    output += chunk;
  });
  child.on('close', (code, signal) => {
    build.child = null;
    try {
      if (code !== 0) throw new Error(`tsc exited with ${signal ?? code}:\n${output}`);
      writeFileSync(join(partial, COMPLETE), '');
      try {
        renameSync(partial, dir);
      } catch (error) {
        // Another run on the same sources finished first: its build is as good.
        if (!existsSync(join(dir, COMPLETE))) throw error;
        rmSync(partial, { recursive: true, force: true });
      }
    } catch (error) {
      writeFileSync(build.errorFile, `building schedflow for the tests failed: ${(error as Error).message}`);
      rmSync(partial, { recursive: true, force: true });
    }
  });
  return build;
}

export default function setup(project: TestProject): () => void {
  const build = startBuild();
  project.provide('cliBuild', { dir: build.dir, errorFile: build.errorFile });
  // A run stopped before the build ended leaves no compiler behind.
  return () => {
    build.child?.kill('SIGKILL');
  };
}
