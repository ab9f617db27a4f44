import { randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join, resolve } from 'node:path';
import { type Command, Option } from 'commander';
import { Lifecycle } from '../lifecycle.js';
import { createLogger } from '../logger.js';
import { parseSimConfig } from '../sim/sim-config.js';
import { SimServer } from '../sim/sim-server.js';
import { LOG_LEVELS, parseInteger } from './options.js';

interface StartFlags {
  dataDir: string;
  simPort: number;
  logLevel?: string;
}

export const DEMO_USER = 'demo';
export const DEMO_ACCOUNT = 'demo';

/**
 * The demo token lives in a file only its owner can read, and is never printed:
 * the banner shows how to use it without showing it.
 */
export function ensureDemoToken(dataDir: string): { tokenFile: string; tokensFile: string } {
  const simDir = join(dataDir, 'sim');
  mkdirSync(simDir, { recursive: true, mode: 0o700 });
  const tokenFile = join(dataDir, 'demo-token');
  const tokensFile = join(simDir, 'tokens.json');
  if (!existsSync(tokenFile)) writeFileSync(tokenFile, randomBytes(24).toString('base64url'), { mode: 0o600 });
  const token = readFileSync(tokenFile, 'utf8').trim();
  const tokens = {
    [token]: { user: DEMO_USER, account: DEMO_ACCOUNT, scopes: ['sched:read', 'scheddb:read', 'sched:jobs:manage'] },
  };
  writeFileSync(tokensFile, JSON.stringify(tokens, null, 2), { mode: 0o600 });
  return { tokenFile, tokensFile };
}

export function registerStartCommand(program: Command): void {
  program
    .command('start')
    .description('run schedflow on this machine; with no scheduler configured, against the embedded simulator')
    .option('--data-dir <dir>', 'where schedflow keeps its state', './data')
    .option('--sim-port <port>', 'port of the embedded scheduler simulator', parseInteger, 6820)
    .addOption(new Option('--log-level <level>', 'log level').choices(LOG_LEVELS).default('info'))
    .action(async (flags: StartFlags) => {
      const dataDir = resolve(flags.dataDir);
      const logger = createLogger({ level: flags.logLevel ?? 'info', pretty: process.stdout.isTTY });
      const lifecycle = new Lifecycle(logger);
      lifecycle.handleSignals();
      const { tokenFile, tokensFile } = ensureDemoToken(dataDir);
      const config = parseSimConfig({
        port: flags.simPort,
        tokensFile,
        stateDir: join(dataDir, 'sim'),
        partitions: [{ name: 'debug', default: true }],
      });
      const sim = new SimServer({ config, logger });
      const url = await sim.start();
      lifecycle.add('simulator', () => sim.stop());
      const sched = `npx schedflow sched --url ${url} --token-file ${tokenFile}`;
      process.stdout.write(
        [
          '',
          `schedflow: embedded scheduler simulator at ${url} (no scheduler configured)`,
          `  demo token (user "${DEMO_USER}", account "${DEMO_ACCOUNT}") in ${tokenFile}`,
          '  try it from another terminal in this folder:',
          `    ${sched} submit config/examples/hello.yaml`,
          `    ${sched} jobs`,
          `    ${sched} job <job_id>`,
          `    ${sched} history --since 1h`,
          `  or with curl: curl -H "Authorization: Bearer $(cat ${tokenFile})" ${url}/sched/v0.0.44/jobs`,
          '  stop with Ctrl-C',
          '',
        ].join('\n'),
      );
    });
}
