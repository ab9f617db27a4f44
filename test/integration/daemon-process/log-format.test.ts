import { type ChildProcess, spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { cleanEnv, READY_BANNER, READY_TIMEOUT_MS, schedflowEntry, spawnDaemon } from '../../helpers/cli-process.js';
import { waitFor } from '../../helpers/http.js';
import { daemonProcessEnv } from './daemon-process-env.js';

/**
 * What `schedflow start` writes on stdout: lines to read on a terminal, JSON for a pipe (a
 * journal, a log shipper), either when asked (`--log-format`, SCHEDFLOW_LOG_FORMAT).
 */

const dproc = daemonProcessEnv();

/** `<time> <LEVEL> …`: a pretty line. */
const PRETTY_LINE = /^\d\d:\d\d:\d\d\.\d{3} (TRACE|DEBUG|INFO |WARN |ERROR|FATAL) /;

/** The log lines of a daemon's stdout: those before its banner. */
function logLines(stdout: string): string[] {
  return stdout.slice(0, stdout.search(READY_BANNER)).split(/\r?\n/).filter(Boolean);
}

/** Each test starts two daemons, one after the other, and waits up to 30 s for a line. */
const TWO_STARTS_MS = 2 * READY_TIMEOUT_MS + 40_000;

describe('the daemon’s log on stdout', { timeout: TWO_STARTS_MS }, () => {
  it('is JSON on a pipe; --log-format pretty gives lines to read, an expected failure one line without a stack', async () => {
    const t = await dproc.setUp({ viaProxy: true });
    const proxy = dproc.proxy;
    if (!proxy) throw new Error('no proxy');
    const env = cleanEnv({ REDIS_URL: t.redisUrl, SCHEDFLOW_RECONCILE_EVERY_MS: '1000' });

    const json = spawnDaemon({ dataDir: t.dataDir, configDir: t.configDir, env, cwd: t.root });
    await json.ready();
    const jsonLines = logLines(json.stdout);
    expect(jsonLines.length).toBeGreaterThan(3);
    for (const line of jsonLines) expect(() => JSON.parse(line), line).not.toThrow();
    await json.stop('SIGTERM');

    const pretty = spawnDaemon({
      dataDir: t.dataDir,
      configDir: t.configDir,
      env,
      cwd: t.root,
      extraArgs: ['--log-format', 'pretty'],
    });
    await pretty.ready();
    // From now on the accounting answers are no JSON: the import fails, is retried, and says so once.
    proxy.rewrite = (req, body) => (req.url.includes('/scheddb/') ? 'not json' : body);
    for (const line of logLines(pretty.stdout)) expect(line).toMatch(PRETTY_LINE);
    const [failed] = await pretty.waitForOutput(/^.*accounting import failed; will retry.*\n(.*\n)?/m, 30_000);
    const [line, next] = failed.split('\n');
    expect(line).toMatch(
      / WARN {2}\[worker\] accounting import failed; will retry profile=test code=SCHEDFLOW_ERR_\w+ err="/,
    );
    // The next line is the daemon's next line, not a stack trace.
    expect(next ?? '').not.toMatch(/^\s+at /);
    expect(pretty.stdout).not.toMatch(/^\s+at /m);
    const stopped = await pretty.stop('SIGTERM');
    expect(stopped.code).toBe(143);
    expect(pretty.stdout).toMatch(/INFO {2}shutdown complete ms=\d+\s*$/);
  });

  it('is lines to read, coloured, on a terminal; SCHEDFLOW_LOG_FORMAT=json keeps JSON there', async () => {
    const t = await dproc.setUp();
    const env = cleanEnv({ REDIS_URL: t.redisUrl });
    delete env.NO_COLOR;
    const onPty = async (extraEnv: NodeJS.ProcessEnv): Promise<string> => {
      // script(1) runs it on a pseudo-terminal, as a shell in a terminal window does.
      const command = [
        process.execPath,
        ...schedflowEntry(),
        'start',
        '--data-dir',
        t.dataDir,
        '--config',
        t.configDir,
        '--listen',
        '127.0.0.1:0',
      ].join(' ');
      const child: ChildProcess = spawn('script', ['-qec', command, '/dev/null'], {
        cwd: t.root,
        env: { ...env, ...extraEnv },
        stdio: ['ignore', 'pipe', 'pipe'],
        detached: true,
      });
      let out = '';
      child.stdout?.setEncoding('utf8').on('data', (chunk: string) => {
        out += chunk;
      });
      const exited = new Promise((resolve) => child.once('close', resolve));
      try {
        await waitFor(async () => (READY_BANNER.test(out) ? true : undefined), {
          what: 'the banner on the terminal',
          timeoutMs: READY_TIMEOUT_MS,
          intervalMs: 100,
        });
      } finally {
        // The whole group: script and the daemon on its terminal.
        process.kill(-(child.pid as number), 'SIGTERM');
        await exited;
      }
      return out;
    };
    const onTerminal = logLines(await onPty({}));
    expect(onTerminal.length).toBeGreaterThan(3);
    // ESC[2m time ESC[0m ESC[32m INFO ESC[0m …
    for (const line of onTerminal) {
      // biome-ignore lint/suspicious/noControlCharactersInRegex: the colours are the point.
      expect(line).toMatch(/^\x1b\[2m\d\d:\d\d:\d\d\.\d{3}\x1b\[0m \x1b\[\d+(;\d+)?m[A-Z]+ *\x1b\[0m /);
    }
    const asked = logLines(await onPty({ SCHEDFLOW_LOG_FORMAT: 'json' }));
    for (const line of asked) expect(() => JSON.parse(line), line).not.toThrow();
  });
});
