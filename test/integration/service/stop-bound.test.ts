import { mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { loadDaemonConfig } from '../../../src/config/daemon-config.js';
import { Lifecycle } from '../../../src/lifecycle.js';
import { createLogger } from '../../../src/logger.js';
import { type Daemon, startDaemon } from '../../../src/main.js';
import { REPO } from '../../helpers/cli-process.js';

/**
 * systemd kills a unit whose stop outlasts TimeoutStopSec (SIGKILL: SQLite and the private
 * Redis not closed, running work not handed back). The unit's value must exceed the longest
 * the daemon's shutdown may take: every step it registered hanging until its own limit. Counted
 * on the start with the most steps (every role, the embedded simulator, the private
 * redis-server, the history on SQLite) and the default settings, as the unit runs it; a new
 * shutdown step, or a longer limit, fails here until the unit is given the time.
 */

let daemon: Daemon | undefined;
let root: string | undefined;

afterEach(async () => {
  await daemon?.stop();
  daemon = undefined;
  if (root) rmSync(root, { recursive: true, force: true });
});

function timeoutStopMs(): number {
  const unit = readFileSync(join(REPO, 'config', 'systemd', 'schedflow.service'), 'utf8');
  const seconds = /^TimeoutStopSec=(\d+)$/m.exec(unit)?.[1];
  if (!seconds) throw new Error('the unit sets no TimeoutStopSec in whole seconds');
  return Number(seconds) * 1000;
}

describe("the unit's TimeoutStopSec", () => {
  it("exceeds the daemon's longest shutdown", async () => {
    root = mkdtempSync(join(tmpdir(), 'schedflow-stop-bound-'));
    mkdirSync(join(root, 'config'));
    // No REDIS_URL and no profile: the private redis-server and the simulator are steps too.
    const config = loadDaemonConfig(
      {},
      {
        dataDir: join(root, 'data'),
        configDir: join(root, 'config'),
        simPort: 0,
        listen: '127.0.0.1:0',
        queuePrefix: `test-${Math.random().toString(36).slice(2, 10)}`,
      },
    );
    const logger = createLogger({ level: process.env.LOG_LEVEL ?? 'silent' });
    const lifecycle = new Lifecycle(logger);
    daemon = await startDaemon(config, logger, lifecycle);
    expect(daemon.simUrl).toBeDefined();
    expect(daemon.apiUrl).toBeDefined();
    // 102 s when this was written (the unit's comment adds it up); a second for the exit itself.
    expect(lifecycle.worstCaseStopMs).toBeGreaterThan(90_000);
    expect(timeoutStopMs()).toBeGreaterThanOrEqual(lifecycle.worstCaseStopMs + 1000);
  });
});
