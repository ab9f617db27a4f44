import { userInfo } from 'node:os';
import { join, resolve } from 'node:path';
import { type Command, InvalidArgumentError, Option } from 'commander';
import { DEFAULT_DATA_DIR } from '../daemon-info.js';
import { Lifecycle, StopRequestedError } from '../lifecycle.js';
import { createLogger, defaultLogFormat } from '../logger.js';
import { ADMIN_TOKEN_FILE } from '../sim/admin-token.js';
import { DEFAULT_JOB_USER } from '../sim/job-user.js';
import { parseSimConfig, readSimConfigFile, type SimConfigInput } from '../sim/sim-config.js';
import { SimServer } from '../sim/sim-server.js';
import { LOG_LEVELS, parseInteger, parseNumber } from './options.js';

interface SimFlags {
  config?: string;
  host?: string;
  port?: number;
  tokens?: string;
  stateDir?: string;
  cpus?: number;
  memoryMb?: number;
  timeScale?: number;
  minJobAge?: number;
  killWait?: number;
  cacheTtl?: number;
  rateCapacity?: number;
  rateRefill?: number;
  munge?: boolean;
  simulatedRuntime?: number;
  jobUser?: string;
  serves?: 'both' | 'proxy' | 'slurmrestd';
  logLevel?: string;
}

function parseCacheTtl(value: string): number {
  const n = parseInteger(value);
  if (n < 2 || n > 60) throw new InvalidArgumentError('the proxy caches for 2 to 60 seconds');
  return n;
}

/** Flags override the config file, which overrides the defaults. */
export function simConfigFromFlags(flags: SimFlags): SimConfigInput {
  const input: SimConfigInput = flags.config ? readSimConfigFile(flags.config) : {};
  if (flags.host !== undefined) input.host = flags.host;
  if (flags.port !== undefined) input.port = flags.port;
  if (flags.tokens !== undefined) input.tokensFile = flags.tokens;
  if (flags.stateDir !== undefined) input.stateDir = flags.stateDir;
  if (flags.cpus !== undefined) input.cpus = flags.cpus;
  if (flags.memoryMb !== undefined) input.memoryMb = flags.memoryMb;
  if (flags.timeScale !== undefined) input.timeScale = flags.timeScale;
  if (flags.minJobAge !== undefined) input.minJobAgeSec = flags.minJobAge;
  if (flags.killWait !== undefined) input.killWaitSec = flags.killWait;
  if (flags.cacheTtl !== undefined) {
    const s = flags.cacheTtl;
    input.cacheTtlSec = {
      jobs: s,
      job: s,
      jobsState: s,
      ping: s,
      meta: s,
      partitions: s,
      nodes: s,
      dbJobs: s,
      dbJob: s,
    };
  }
  if (flags.rateCapacity !== undefined || flags.rateRefill !== undefined) {
    input.rateLimit = {
      ...input.rateLimit,
      ...(flags.rateCapacity !== undefined && { capacity: flags.rateCapacity }),
      ...(flags.rateRefill !== undefined && { refillPerSecond: flags.rateRefill }),
    };
  }
  if (flags.munge === false) input.munge = false;
  if (flags.simulatedRuntime !== undefined) input.simulatedRuntimeSec = flags.simulatedRuntime;
  if (flags.jobUser !== undefined) input.jobUser = flags.jobUser;
  if (flags.serves !== undefined) input.serves = flags.serves;
  return input;
}

export function registerSimCommand(program: Command): void {
  program
    .command('sim')
    .description('run the scheduler proxy simulator (a stand-in for a Slurm cluster behind the site proxy)')
    .option('--config <file>', 'simulator settings file (JSON or YAML)')
    .option('--host <host>', 'address to listen on (default 127.0.0.1)')
    .option('--port <port>', 'port to listen on (default 6820; 0 picks a free one)', parseInteger)
    .option('--tokens <file>', 'bearer tokens file: {"<token>": {"user", "account", "scopes"}}')
    .option('--state-dir <dir>', `where the job table, scripts and job state live (default ${DEFAULT_DATA_DIR}/sim)`)
    .option('--cpus <n>', 'CPUs of the simulated node (default 4)', parseInteger)
    .option('--memory-mb <n>', 'memory of the simulated node in MB (default 8192)', parseInteger)
    .option('--time-scale <x>', 'time limits elapse x times faster than real time (default 1)', parseNumber)
    .option('--min-job-age <sec>', 'seconds finished jobs stay in /jobs (MinJobAge, default 300)', parseNumber)
    .option('--kill-wait <sec>', 'seconds between SIGTERM and SIGKILL (KillWait, default 5)', parseNumber)
    .option(
      '--cache-ttl <sec>',
      'one cache lifetime for every GET endpoint, 2 to 60 (default: 2 to 60 by endpoint)',
      parseCacheTtl,
    )
    .option('--rate-capacity <n>', 'per-IP token bucket capacity (default 100)', parseNumber)
    .option('--rate-refill <n>', 'per-IP tokens refilled per second (default 20)', parseNumber)
    .option('--no-munge', 'refuse MUNGE credentials')
    .option(
      '--simulated-runtime <sec>',
      'benchmark mode: run no scripts; every job runs this long and completes',
      parseNumber,
    )
    .option(
      '--job-user <user>',
      `unprivileged host user job scripts run as when started as root (default ${DEFAULT_JOB_USER})`,
    )
    .addOption(
      new Option('--serves <api>', 'the API it serves: both (default), only proxy, or only slurmrestd').choices([
        'both',
        'proxy',
        'slurmrestd',
      ]),
    )
    .addOption(new Option('--log-level <level>', 'log level').choices(LOG_LEVELS).default('info'))
    .action(async (flags: SimFlags) => {
      const config = parseSimConfig(simConfigFromFlags(flags));
      const logger = createLogger({ level: flags.logLevel ?? 'info', format: defaultLogFormat() });
      if (!config.tokensFile) {
        logger.warn('no --tokens file: every bearer request will be refused (401); MUNGE callers still work');
      }
      const lifecycle = new Lifecycle(logger);
      lifecycle.handleProcessEvents();
      const server = new SimServer({ config, logger });
      let url: string;
      try {
        url = await lifecycle.track(
          (async () => {
            const started = await server.start();
            // It ends the jobs it runs: SIGTERM, then SIGKILL after its KillWait.
            lifecycle.add('simulator', () => server.stop(), { timeoutMs: (config.killWaitSec + 5) * 1000 });
            return started;
          })(),
        );
      } catch (error) {
        // Stopped by a signal while starting: its handler exits once the shutdown is done.
        if (error instanceof StopRequestedError) return;
        throw error;
      }
      logger.info(
        {
          url,
          stateDir: config.stateDir,
          cpus: config.cpus,
          adminTokenFile: join(resolve(config.stateDir), ADMIN_TOKEN_FILE),
          jobUser: server.jobUser?.name ?? userInfo().username,
        },
        'scheduler simulator listening',
      );
    });
}
