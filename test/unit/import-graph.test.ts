import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import madge from 'madge';
import { beforeAll, describe, expect, it } from 'vitest';

/**
 * The import graph of src/ and workers/: no cycle, and no arrow from a lower layer to a
 * higher one. Layers, lowest first, as the code needs them:
 *
 *  1. foundation: src/lib/, errors, logger, lifecycle (lib throws schedflow's errors and logs;
 *     one layer, so either may use the other, but never in a cycle)
 *  2. sched: the scheduler API, its codecs and client registry
 *  3. db: schema and plain queries (accounting rows use sched's job model)
 *  4. views: how requests, runs, pipelines and summaries are shown (API, UI, webhook bodies)
 *  5. redis: the private redis-server and its watch
 *  6. daemon-info: the daemon.json contract between the daemon and the CLI, and the registry
 *     of running daemons they share (src/daemon-registry.ts)
 *  7. llm: the chat-completions client
 *  8. sim: the simulator of the scheduler proxy and LLM endpoint
 *  9. notify: webhook bodies, sending, the outbox dispatcher
 * 10. queue: the catalog (names, payloads, retry policy), queues, ticks, the submit queue
 * 11. requests: the request aggregate (accept, transition, submit, cancel, poll, reconcile, deadlines)
 * 12. pipelines: runs are made of requests (run deadlines handed to the request deadline check)
 * 13. summaries: of ended requests and runs; re-submission through accept
 * 14. config: the daemon's settings, made of the queue prefix and the summary settings
 * 15. http: the local API and the admin UI (src/http/{api,ui})
 * 16. workers: one processor per queue and their start-up
 * 17. top: the composition root (src/main.ts) and the CLI
 *
 * Beside the layers, src/client/ (the typed client `schedflow/client`, for other programs) stands
 * alone: it imports nothing outside itself, so a program can use it without the daemon's
 * dependencies, and nothing of the daemon imports it.
 */
const LAYERS: readonly { name: string; holds: (file: string) => boolean }[] = [
  // Its own: the checks below keep it apart from every layer (see above).
  { name: 'client', holds: (f) => f.startsWith('src/client/') },
  {
    name: 'foundation',
    holds: (f) =>
      f.startsWith('src/lib/') || /^src\/(errors|logger|lifecycle)\.ts$/.test(f) || f.startsWith('src/errors/'),
  },
  { name: 'sched', holds: (f) => f.startsWith('src/sched/') },
  { name: 'db', holds: (f) => f.startsWith('src/db/') },
  // Who may see and change what (owners, actors, scopes): every way in asks it.
  { name: 'access', holds: (f) => f.startsWith('src/access/') },
  // How requests, runs and pipelines are shown: the API, the UI and webhook bodies (notify) use them.
  { name: 'views', holds: (f) => f.startsWith('src/views/') },
  { name: 'redis', holds: (f) => f.startsWith('src/redis/') },
  { name: 'daemon-info', holds: (f) => f === 'src/daemon-info.ts' || f === 'src/daemon-registry.ts' },
  { name: 'llm', holds: (f) => f.startsWith('src/llm/') },
  { name: 'sim', holds: (f) => f.startsWith('src/sim/') },
  { name: 'notify', holds: (f) => f.startsWith('src/notify/') },
  { name: 'queue', holds: (f) => f.startsWith('src/queue/') },
  { name: 'requests', holds: (f) => f.startsWith('src/requests/') },
  { name: 'pipelines', holds: (f) => f.startsWith('src/pipelines/') },
  { name: 'summaries', holds: (f) => f.startsWith('src/summaries/') },
  { name: 'config', holds: (f) => f.startsWith('src/config/') },
  { name: 'http', holds: (f) => /^src\/(api|ui|http)\//.test(f) },
  { name: 'workers', holds: (f) => f.startsWith('workers/') },
  { name: 'top', holds: (f) => f === 'src/main.ts' || f === 'src/cli.ts' || f.startsWith('src/cli/') },
];

function layerOf(file: string): number {
  return LAYERS.findIndex((layer) => layer.holds(file));
}

const root = fileURLToPath(new URL('../..', import.meta.url));
let graph: Awaited<ReturnType<typeof madge>>;

describe('import graph of src/ and workers/', () => {
  beforeAll(async () => {
    graph = await madge(['src', 'workers'], {
      baseDir: root,
      fileExtensions: ['ts'],
      tsConfig: `${root}tsconfig.json`,
    });
  }, 60_000);

  it('has no cycle', () => {
    expect(graph.circular()).toEqual([]);
  });

  it('places every file in a layer', () => {
    const unplaced = Object.keys(graph.obj()).filter((file) => layerOf(file) < 0);
    expect(unplaced, 'give these a layer in LAYERS').toEqual([]);
  });

  it('has no arrow from a lower layer to a higher one', () => {
    const upward: string[] = [];
    for (const [file, imports] of Object.entries(graph.obj())) {
      const from = layerOf(file);
      for (const imported of imports) {
        const to = layerOf(imported);
        if (from >= 0 && to > from) {
          upward.push(`${file} (${LAYERS[from]?.name}) → ${imported} (${LAYERS[to]?.name})`);
        }
      }
    }
    expect(upward).toEqual([]);
  });

  it('keeps src/client/ apart: it imports only its own files and packages none, and nothing else imports it', () => {
    const crossing: string[] = [];
    for (const [file, imports] of Object.entries(graph.obj())) {
      const inClient = file.startsWith('src/client/');
      for (const imported of imports) {
        if (inClient !== imported.startsWith('src/client/')) crossing.push(`${file} → ${imported}`);
      }
    }
    expect(crossing).toEqual([]);
    // Packages too (madge lists only the repository's files): the client runs on fetch alone.
    const packages = Object.keys(graph.obj())
      .filter((file) => file.startsWith('src/client/'))
      .flatMap((file) =>
        [...readFileSync(join(root, file), 'utf8').matchAll(/^(?:import|export)[^'"]*from\s+'([^'.][^']*)'/gm)].map(
          (m) => `${file} → ${m[1]}`,
        ),
      );
    expect(packages).toEqual([]);
  });

  it('resolves every relative import', () => {
    // A file madge could not resolve would be missing from the graph, and its arrows unchecked.
    expect(graph.skipped.filter((file) => file.startsWith('.'))).toEqual([]);
  });
});
