import { createHash } from 'node:crypto';
import {
  copyFileSync,
  existsSync,
  mkdirSync,
  readdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import type { TestProject } from 'vitest/node';

/**
 * A vitest globalSetup: builds `schedflow` once per run, so the tests start the CLI and the
 * daemon as `node <build>/src/cli.js`, as `npm start` does, rather than through tsx. Through
 * tsx each start spent about a second of CPU on its loader (`schedflow --version` 4 s against
 * 1.2 s built; `jobs list` 2.5 s against 0.8 s), and the suite starts the CLI over a hundred
 * times.
 *
 * The build is what `npm run build` (tsc -p tsconfig.build.json) emits, file for file, made
 * with esbuild's transform of each file on its own: tsconfig.json's `isolatedModules` and
 * `verbatimModuleSyntax` mean every file compiles alone, type-only imports marked, so emitting
 * one needs no other; the JSON files beside the sources are copied, as tsc copies the ones they
 * import. tsc took 8 s of CPU (twenty seconds and more at the start of a run, when every worker
 * is starting) while the files that start schedflow waited; esbuild takes well under a second.
 * The type check is `npm test`'s, before the tests.
 *
 * The build is kept under `.tmp/cli-build/<hash of the sources>`, so a run on unchanged sources
 * starts at once. It runs in the background: the files that start the CLI wait for it in a
 * `beforeAll` (test/helpers/cli-process.ts), the others need not. No `vitest` import here: a
 * globalSetup runs in vitest's own process.
 */

export interface CliBuild {
  /** The build's root once complete: `<dir>/src/cli.js` is the entry point. */
  dir: string;
  /** Written with the error when the build fails. */
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

/** Every file under the folders the build is made of, as paths relative to the repository. */
function sourceFiles(): string[] {
  const files: string[] = [];
  const walk = (path: string) => {
    if (statSync(path).isDirectory()) for (const entry of readdirSync(path)) walk(join(path, entry));
    else files.push(relative(REPO, path));
  };
  for (const dir of ['src', 'workers']) walk(join(REPO, dir));
  return files;
}

/** tsconfig.json's emit options that change what a file compiles to (target ES2022 keeps class fields as defined). */
const TSCONFIG_RAW = { compilerOptions: { verbatimModuleSyntax: true, useDefineForClassFields: true } } as const;

/** Emits src/ and workers/ into `outDir` as tsc would: each .ts as .js, each .json as is. */
async function emit(outDir: string): Promise<void> {
  // The esbuild vite and tsx use too (a devDependency of its own, so it stays whatever they move to).
  const esbuild = createRequire(join(REPO, 'package.json'))('esbuild') as typeof import('esbuild');
  await Promise.all(
    sourceFiles().map(async (file) => {
      if (file.endsWith('.ts') && !file.endsWith('.d.ts')) {
        const { code } = await esbuild.transform(readFileSync(join(REPO, file), 'utf8'), {
          loader: 'ts',
          format: 'esm',
          // package.json's engines: import attributes (`with { type: 'json' }`) kept as written.
          target: 'node20.19',
          tsconfigRaw: TSCONFIG_RAW,
          sourcefile: file,
        });
        const dest = join(outDir, file.replace(/\.ts$/, '.js'));
        mkdirSync(dirname(dest), { recursive: true });
        writeFileSync(dest, code);
      } else if (file.endsWith('.json')) {
        const dest = join(outDir, file);
        mkdirSync(dirname(dest), { recursive: true });
        copyFileSync(join(REPO, file), dest);
      }
    }),
  );
}

/** One build per vitest process, however many projects name this globalSetup. */
const KEY = Symbol.for('schedflow.test.cliBuild');

function startBuild(): CliBuild {
  const memo = (globalThis as Record<symbol, CliBuild | undefined>)[KEY];
  if (memo) return memo;
  const hash = sourcesHash();
  const dir = join(CACHE, hash);
  const partial = join(CACHE, `${hash}.partial-${process.pid}`);
  const build: CliBuild = { dir, errorFile: `${partial}.error` };
  (globalThis as Record<symbol, CliBuild | undefined>)[KEY] = build;
  if (existsSync(join(dir, COMPLETE))) return build;
  mkdirSync(CACHE, { recursive: true });
  pruneOldBuilds(hash);
  rmSync(build.errorFile, { force: true });
  emit(partial)
    .then(() => {
      writeFileSync(join(partial, COMPLETE), '');
      try {
        renameSync(partial, dir);
      } catch (error) {
        // Another run on the same sources finished first: its build is as good.
        if (!existsSync(join(dir, COMPLETE))) throw error;
        rmSync(partial, { recursive: true, force: true });
      }
    })
    .catch((error: unknown) => {
      writeFileSync(build.errorFile, `building schedflow for the tests failed: ${(error as Error).message}`);
      rmSync(partial, { recursive: true, force: true });
    });
  return build;
}

export default function setup(project: TestProject): void {
  const build = startBuild();
  project.provide('cliBuild', { dir: build.dir, errorFile: build.errorFile });
}
