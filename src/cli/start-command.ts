import { type Command, Option } from 'commander';
import { type DaemonRole, loadDaemonConfig } from '../config/daemon-config.js';
import { DEFAULT_DATA_DIR } from '../daemon-info.js';
import { Lifecycle, StopRequestedError } from '../lifecycle.js';
import { createLogger, defaultLogFormat, LOG_FORMATS, type LogFormat } from '../logger.js';
import { type Daemon, startDaemon } from '../main.js';
import { FAILED_CHECK_RETRY_MS } from '../sched/client-registry.js';
import { DEMO_ACCOUNT, DEMO_USER } from '../sim/demo-token.js';
import { cliInvocation } from './invocation.js';
import { LOG_LEVELS, parseInteger } from './options.js';

interface StartFlags {
  dataDir?: string;
  config?: string;
  pipelines?: string;
  simPort?: number;
  roles?: string;
  listen?: string;
  logLevel: string;
  logFormat?: LogFormat;
}

export function registerStartCommand(program: Command): void {
  program
    .command('start')
    .description(
      'run the daemon: queues, submission, polling, history; on the embedded simulator when no scheduler is configured',
    )
    .option('--data-dir <dir>', `where schedflow keeps its state (default ${DEFAULT_DATA_DIR}, or SCHEDFLOW_DATA_DIR)`)
    .option(
      '--config <dir>',
      'configuration folder holding profiles/ and pipelines/ (default ./config, or SCHEDFLOW_CONFIG_DIR)',
    )
    .option('--pipelines <dir>', 'pipeline files (default <config>/pipelines, or SCHEDFLOW_PIPELINES_DIR)')
    .option('--sim-port <port>', 'port of the embedded scheduler simulator (default 6820)', parseInteger)
    .option('--roles <roles>', 'run only some of the work: worker, scheduler, web (comma-separated; default all three)')
    .option(
      '--listen <host:port>',
      'where the local HTTP API listens (web role; default 127.0.0.1:8080, or SCHEDFLOW_LISTEN)',
    )
    .addOption(new Option('--log-level <level>', 'log level').choices(LOG_LEVELS).default('info'))
    .addOption(
      new Option('--log-format <format>', 'pretty lines or JSON (default: pretty on a terminal, else JSON)').choices(
        LOG_FORMATS,
      ),
    )
    .action(async (flags: StartFlags) => {
      const config = loadDaemonConfig(process.env, {
        dataDir: flags.dataDir,
        configDir: flags.config,
        pipelinesDir: flags.pipelines,
        simPort: flags.simPort,
        roles: flags.roles?.split(',').map((r) => r.trim()) as DaemonRole[] | undefined,
        listen: flags.listen,
        logFormat: flags.logFormat,
      });
      const logger = createLogger({ level: flags.logLevel, format: config.logFormat ?? defaultLogFormat() });
      // Before the start: a Ctrl-C while it runs stops what has started, as after it.
      const lifecycle = new Lifecycle(logger);
      lifecycle.handleProcessEvents();
      let daemon: Daemon;
      try {
        daemon = await startDaemon(config, logger, lifecycle);
      } catch (error) {
        // Stopped by a signal while starting: its handler exits once the shutdown is done.
        if (error instanceof StopRequestedError) return;
        throw error;
      }
      const dataFlag = `--data-dir ${config.dataDir}`;
      const cli = cliInvocation();
      const lines = ['', `schedflow is running (data in ${config.dataDir})`];
      if (daemon.simUrl) {
        lines.push(
          `  no scheduler profile in ${config.configDir}/profiles: using the embedded simulator at ${daemon.simUrl}`,
          `  (demo user "${DEMO_USER}", account "${DEMO_ACCOUNT}", token in ${config.dataDir}/demo-token)`,
          // Root's jobs would make every token with sched:jobs:manage root on the host.
          ...(daemon.simJobUser
            ? [`  its jobs run as the host user ${daemon.simJobUser}, not as root (SCHEDFLOW_SIM_JOB_USER)`]
            : []),
          // It lives in this process: stopping the daemon kills its jobs (NODE_FAIL after a restart).
          '  jobs it runs end when the daemon stops: stopping it fails them (node_fail)',
          '  to use a real cluster, add a profile (see config/examples/profile.yaml) and start again',
        );
      } else {
        lines.push(`  scheduler profiles: ${[...daemon.profiles.keys()].join(', ')}`);
      }
      // What each token may do, learnt at start: a missing scope is said here, not at the first failed submit.
      for (const name of daemon.profiles.keys()) {
        // A profile whose check failed (url, token, flavor, version): one sentence with the fix,
        // and nothing else to say of it until it connects.
        const problem = daemon.clients.problem(name);
        if (problem) {
          lines.push(
            `  WARNING: ${problem.sentence} (jobs for it are refused until a check passes; checked again within ${FAILED_CHECK_RETRY_MS / 1000} s)`,
          );
          continue;
        }
        const scopes = daemon.clients.scopes(name);
        if (scopes && scopes.source !== 'not-applicable') {
          lines.push(`  ${scopes.missing.length ? 'WARNING: ' : ''}profile ${name}: ${scopes.detail}`);
        }
        // Plain slurmrestd: the accounts the user's associations allow, or why they are not known.
        const accounts = daemon.clients.accounts(name);
        if (accounts)
          lines.push(`  ${accounts.defaultNotAssociated ? 'WARNING: ' : ''}profile ${name}: ${accounts.detail}`);
      }
      // Where the requests are kept (its password replaced): on PostgreSQL, not in the data dir.
      lines.push(
        `  history: ${daemon.history.sqlite ? daemon.history.where : `PostgreSQL at ${daemon.history.where}`}`,
      );
      const pipelines = await daemon.pipelines.list();
      const broken = pipelines.filter((p) => p.error).length;
      lines.push(
        `  pipelines: ${pipelines.length - broken} loaded from ${config.pipelinesDir}${broken ? ` (${broken} invalid: see the log)` : ''}`,
      );
      const { summaries } = daemon;
      lines.push(
        `  summaries: ${summaries.enabled ? 'on for every finished job' : 'only for requests and pipelines that ask (SCHEDFLOW_SUMMARIES=on for all)'}, ${summaries.llm ? `written by ${summaries.llm.model} at ${summaries.llm.url}` : 'from the template (no LLM: SCHEDFLOW_LLM_URL)'}`,
      );
      if (daemon.apiUrl) {
        lines.push(
          `  local API: ${daemon.apiUrl}/api/v1 (docs: ${daemon.apiUrl}/api/v1/docs)`,
          `    a token for it: ${cli} tokens create --name <name> --scopes read,submit,cancel ${dataFlag}`,
          `  admin web UI: ${daemon.apiUrl}/ui (log in with a token that has the admin scope, or the UI password)`,
        );
      }
      lines.push(
        '  from another terminal in this folder:',
        `    ${cli} jobs submit config/examples/hello.yaml --wait ${dataFlag}`,
        `    ${cli} jobs list ${dataFlag}`,
        `    ${cli} jobs show <request id> ${dataFlag}`,
        '  stop with Ctrl-C',
        '',
      );
      process.stdout.write(lines.join('\n'));
    });
}
