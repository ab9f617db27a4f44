import { randomUUID } from 'node:crypto';
import { resolve } from 'node:path';
import { type Command, Option } from 'commander';
import { ConfigError, SchedflowError } from '../errors.js';
import { createLogger } from '../logger.js';
import { SchedClient } from '../sched/client.js';
import { describeJobUpdate, type JobUpdate, jobIdOfUpdate, parseJobUpdate } from '../sched/job-update.js';
import { checkJobUpdateAtDoor } from '../sched/job-update-door.js';
import { loadProfiles, type Profile, parseProfile } from '../sched/profile.js';
import { credentialSource, problemOf } from '../sched/profile-check.js';
import { JobNotFoundError } from '../sched/sched-errors.js';
import { EXIT } from './exit-codes.js';
import { freshnessNote, jobDetail, jobsTable } from './format.js';
import { readJobFile } from './job-file.js';
import { LOG_LEVELS, parseInteger, parseSince } from './options.js';
import { print as printText } from './terminal.js';

interface ConnectionFlags {
  config: string;
  profile?: string;
  url?: string;
  flavor?: 'proxy' | 'slurmrestd';
  auth?: 'bearer' | 'header-pair' | 'munge';
  tokenFile?: string;
  tokenEnv?: string;
  user?: string;
  apiVersion?: string;
  account?: string;
  partition?: string;
  json?: boolean;
  logLevel: string;
}

/** A profile from `--url` and friends, or the named (or only) one in `<config>/profiles/`. */
export function profileFromFlags(flags: ConnectionFlags): Profile {
  if (flags.url) {
    const type = flags.auth ?? 'bearer';
    const auth =
      type === 'munge'
        ? { type }
        : {
            type,
            ...(type === 'header-pair' && { user: flags.user }),
            ...(flags.tokenFile && { tokenFile: flags.tokenFile }),
            ...(flags.tokenEnv && { tokenEnv: flags.tokenEnv }),
            ...(!flags.tokenFile && !flags.tokenEnv && { tokenEnv: 'SCHED_TOKEN' }),
          };
    return parseProfile(
      'command-line',
      {
        url: flags.url,
        flavor: flags.flavor,
        auth,
        version: flags.apiVersion,
        account: flags.account,
        partition: flags.partition,
      },
      'the connection flags',
    );
  }
  const dir = resolve(flags.config, 'profiles');
  const profiles = loadProfiles(dir);
  const name = flags.profile ?? (profiles.size === 1 ? [...profiles.keys()][0] : undefined);
  if (!name) {
    throw new ConfigError(
      profiles.size === 0
        ? `no scheduler profile in ${dir}; give --url (with --token-file) or add a profile there (see README)`
        : `several profiles in ${dir} (${[...profiles.keys()].join(', ')}); choose one with --profile`,
    );
  }
  const profile = profiles.get(name);
  if (!profile)
    throw new ConfigError(`no profile "${name}" in ${dir} (have: ${[...profiles.keys()].join(', ') || 'none'})`);
  const overrides = { account: flags.account, partition: flags.partition, version: flags.apiVersion };
  return { ...profile, ...Object.fromEntries(Object.entries(overrides).filter(([, v]) => v !== undefined)) };
}

const count = (n: number, noun: string) => `${n} ${noun}${n === 1 ? '' : 's'}`;

function print(flags: ConnectionFlags, json: unknown, text: () => string): void {
  printText(`${flags.json ? JSON.stringify(json, null, 2) : text()}\n`);
}

/** Runs one command with a connected client; every failure becomes a message and an exit code. */
async function withClient(flags: ConnectionFlags, run: (client: SchedClient) => Promise<void>): Promise<void> {
  const logger = createLogger({ level: flags.logLevel, format: 'json' });
  const client = await SchedClient.connect(profileFromFlags(flags), { logger });
  try {
    await run(client);
  } finally {
    await client.close();
  }
}

export function registerSchedCommand(program: Command): void {
  const sched = program
    .command('sched')
    .description('talk to the scheduler API directly (for people: tables by default, --json for scripts)')
    .option('--config <dir>', 'configuration folder holding profiles/', 'config')
    .option('--profile <name>', 'profile in <config>/profiles/<name>.yaml')
    .option('--url <url>', 'scheduler API base URL (instead of a profile)')
    .addOption(
      new Option('--flavor <flavor>', 'proxy (/sched) or plain slurmrestd (/slurm)').choices(['proxy', 'slurmrestd']),
    )
    .addOption(new Option('--auth <type>', 'authentication (with --url)').choices(['bearer', 'header-pair', 'munge']))
    .option('--token-file <file>', 'file holding the token (mode 600)')
    .option('--token-env <var>', 'environment variable holding the token (default SCHED_TOKEN)')
    .option('--user <name>', 'user name for --auth header-pair')
    .option('--api-version <version>', 'v0.0.42, v0.0.43, v0.0.44 or latest')
    .option('--account <account>', "the token's account")
    .option('--partition <partition>', 'default partition for submissions')
    .option('--json', 'print JSON instead of tables')
    .addOption(new Option('--log-level <level>', 'log level (logs go to stderr)').choices(LOG_LEVELS).default('warn'));

  const flagsOf = (cmd: Command): ConnectionFlags => cmd.optsWithGlobals() as ConnectionFlags;

  sched
    .command('ping')
    .description('check that the scheduler answers an authenticated request; prints latency and the API version')
    .action(async (_opts, cmd: Command) => {
      const flags = flagsOf(cmd);
      await withClient(flags, async (client) => {
        const result = await client.ping();
        print(
          flags,
          { ...result, version: client.version },
          () =>
            `${result.ok ? 'ok' : 'not ok'}: ${client.profile.url} answered in ${result.latencyMs} ms (API ${client.version})`,
        );
        if (!result.ok) process.exitCode = EXIT.unavailable;
      });
    });

  sched
    .command('check')
    .description(
      'check the profile as the daemon does at start: reachable, the flavor and API version it says, its credential (an authenticated request), its scopes',
    )
    .action(async (_opts, cmd: Command) => {
      const flags = flagsOf(cmd);
      const profile = profileFromFlags(flags);
      // Its verdict says what the retries' warnings would (the default level, warn, shows errors only).
      const logger = createLogger({ level: flags.logLevel === 'warn' ? 'error' : flags.logLevel, format: 'json' });
      const started = Date.now();
      let client: SchedClient;
      try {
        client = await SchedClient.connect(profile, { logger });
      } catch (error) {
        // A mistake in the profile file itself (an unreadable token) is said as any other.
        if (error instanceof ConfigError || !(error instanceof SchedflowError)) throw error;
        const problem = problemOf(profile, error);
        print(
          flags,
          { ok: false, profile: profile.name, url: profile.url, problem },
          () => `not ok: ${problem.sentence}`,
        );
        process.exitCode = problem.kind === 'unreachable' ? EXIT.unavailable : EXIT.usage;
        return;
      }
      try {
        const latencyMs = Date.now() - started;
        const scopes = await client.probeScopes();
        const ok = scopes.missing.length === 0;
        const flavor = profile.flavor === 'proxy' ? 'the scheduler proxy' : 'plain slurmrestd';
        print(
          flags,
          {
            ok,
            profile: profile.name,
            url: profile.url,
            flavor: profile.flavor,
            version: client.version,
            latencyMs,
            scopes,
          },
          () =>
            ok
              ? `ok: profile "${profile.name}": ${flavor} at ${profile.url} accepted ${credentialSource(profile)} (API ${client.version}, ${latencyMs} ms); ${scopes.detail}`
              : `not ok: profile "${profile.name}": ${scopes.detail}`,
        );
        if (!ok) process.exitCode = EXIT.usage;
      } finally {
        await client.close();
      }
    });

  sched
    .command('versions')
    .description('API versions the scheduler supports, and the one in use')
    .action(async (_opts, cmd: Command) => {
      const flags = flagsOf(cmd);
      await withClient(flags, async (client) => {
        const supported = await client.supportedVersions();
        print(flags, { supported, inUse: client.version }, () =>
          supported.map((v) => `${v}${v === client.version ? '  (in use)' : ''}`).join('\n'),
        );
      });
    });

  sched
    .command('jobs')
    .description('jobs in the controller (pending, running, recently finished)')
    .option('--state <state>', 'only jobs in this state (e.g. RUNNING)')
    .action(async (opts: { state?: string }, cmd: Command) => {
      const flags = flagsOf(cmd);
      await withClient(flags, async (client) => {
        const { data, freshness } = await client.listJobs();
        const jobs = opts.state ? data.jobs.filter((j) => j.state === opts.state?.toUpperCase()) : data.jobs;
        print(
          flags,
          { jobs, freshness },
          () => `${jobsTable(jobs)}\n(${count(jobs.length, 'job')}, ${freshnessNote(freshness)})`,
        );
      });
    });

  sched
    .command('states')
    .description('the light state listing (jobs/state): id and state of the given jobs, or of all')
    .argument('[job_ids...]', 'Slurm job ids (default: every job in the controller)')
    .action(async (ids: string[], _opts, cmd: Command) => {
      const flags = flagsOf(cmd);
      const jobIds = ids.map((id) => parseInteger(id));
      await withClient(flags, async (client) => {
        const { data, freshness } = await client.listJobStates(jobIds);
        print(
          flags,
          { jobs: data, freshness },
          () =>
            `${data.map((j) => `${j.job_id}\t${j.state_flags.join(',')}`).join('\n')}\n(${count(data.length, 'job')}, ${freshnessNote(freshness)})`,
        );
      });
    });

  sched
    .command('job')
    .description('one job: from the controller, or from accounting once it has left the controller')
    .argument('<job_id>', 'Slurm job id', parseInteger)
    .action(async (jobId: number, _opts, cmd: Command) => {
      const flags = flagsOf(cmd);
      await withClient(flags, async (client) => {
        let read: Awaited<ReturnType<SchedClient['getJob']>>;
        try {
          read = await client.getJob(jobId);
        } catch (error) {
          if (!(error instanceof JobNotFoundError)) throw error;
          const history = await client.getAccountingJob(jobId);
          if (!history.data)
            throw new JobNotFoundError(`no job ${jobId} in the controller or in accounting`, error.detail);
          read = { data: history.data, freshness: history.freshness };
        }
        print(flags, read, () => `${jobDetail(read.data)}\n(${read.data.source}, ${freshnessNote(read.freshness)})`);
      });
    });

  sched
    .command('submit')
    .description(
      'submit a job file (YAML or JSON job spec, or an sbatch script) straight to the scheduler (the daemon does not follow it: schedflow jobs submit queues one it does)',
    )
    .argument('<file>', 'job file')
    .option(
      '--request-id <id>',
      "this command's marker (idempotency key): submitting again with it finds the first job instead",
    )
    .action(async (file: string, opts: { requestId?: string }, cmd: Command) => {
      const flags = flagsOf(cmd);
      const { spec, retry } = readJobFile(file);
      if (retry !== undefined) {
        throw new ConfigError(`${file}: retry: a retry policy is the daemon's; submit it with schedflow jobs submit`);
      }
      await withClient(flags, async (client) => {
        const requestId = opts.requestId ?? randomUUID();
        // An answer the proxy cached before now cannot prove the request was never submitted.
        const existing = opts.requestId ? await client.findByMarker(requestId, { notBeforeMs: Date.now() }) : null;
        const result = existing ? { job_id: existing.job_id, adopted: true } : await client.submit(spec, requestId);
        // The marker goes in the job's comment (`schedflow:<marker>`) so `--request-id` finds the
        // job again; no daemon request has it, which `jobs show` would otherwise be asked about.
        // `requestId` stays in the JSON for scripts written before `marker`.
        print(
          flags,
          { ...result, marker: requestId, requestId, tracked: false },
          () =>
            `${result.adopted ? 'already submitted as' : 'submitted'} job ${result.job_id} (marker ${requestId}: not a request of the daemon, which does not follow this job; schedflow jobs submit queues one it follows)`,
        );
      });
    });

  sched
    .command('cancel')
    .description('cancel a job')
    .argument('<job_id>', 'Slurm job id', parseInteger)
    .action(async (jobId: number, _opts, cmd: Command) => {
      const flags = flagsOf(cmd);
      await withClient(flags, async (client) => {
        await client.cancel(jobId);
        print(flags, { job_id: jobId, cancelled: true }, () => `cancelled job ${jobId}`);
      });
    });

  /** Sends an update (after the door's checks) and says what was done. */
  const updateJob = async (cmd: Command, jobIdText: string, update: JobUpdate, done: string) => {
    const flags = flagsOf(cmd);
    const jobId = jobIdOfUpdate(jobIdText);
    const checked = parseJobUpdate(update);
    await withClient(flags, async (client) => {
      await checkJobUpdateAtDoor(client, jobId, checked);
      await client.updateJob(jobId, checked);
      print(flags, { job_id: jobId, ...checked }, () => `${done} job ${jobId}`);
    });
  };

  sched
    .command('hold')
    .description('hold a pending job (as its user: priority 0, reason JobHeldUser) until released')
    .argument('<job_id>', 'Slurm job id, or an array task as 123_4')
    .action((jobId: string, _opts, cmd: Command) => updateJob(cmd, jobId, { hold: true }, 'held'));

  sched
    .command('release')
    .description('release a held job')
    .argument('<job_id>', 'Slurm job id, or an array task as 123_4')
    .action((jobId: string, _opts, cmd: Command) => updateJob(cmd, jobId, { hold: false }, 'released'));

  sched
    .command('update')
    .description(
      "change a job: a pending job's partition, time limit, QOS, nice, name or comment (a running one keeps its partition, and a user may only lower its time limit)",
    )
    .argument('<job_id>', 'Slurm job id, or an array task as 123_4')
    .option('--time-limit <minutes>', 'new time limit in minutes', parseInteger)
    .option('--qos <qos>', 'new QOS')
    .option('--nice <n>', 'new nice value (negative only for operators)', parseInteger)
    .option('--name <name>', 'new job name')
    .option('--comment <text>', 'new comment')
    .action(
      (
        jobId: string,
        opts: { timeLimit?: number; qos?: string; nice?: number; name?: string; comment?: string },
        cmd: Command,
      ) => {
        // --partition is the sched command's own flag (read wherever it is given): here, the new partition.
        const partition = flagsOf(cmd).partition;
        const update: JobUpdate = {
          timeLimitMin: opts.timeLimit,
          partition,
          qos: opts.qos,
          nice: opts.nice,
          name: opts.name,
          comment: opts.comment,
        };
        return updateJob(cmd, jobId, update, `updated (${describeJobUpdate(parseJobUpdate(update))})`);
      },
    );

  sched
    .command('history')
    .description('accounting records (slurmdbd) since a time')
    .requiredOption('--since <time>', 'e.g. 2h, 3d, 2026-11-01, Unix seconds', (v) => parseSince(v))
    .option('--until <time>', 'end of the window', (v) => parseSince(v))
    .option('--state <states>', 'comma-separated states, e.g. FAILED,TIMEOUT')
    .option('--name <names>', 'comma-separated job names')
    .option('--all-accounts', "not only the profile's account")
    .action(
      async (
        opts: { since: number; until?: number; state?: string; name?: string; allAccounts?: boolean },
        cmd: Command,
      ) => {
        const flags = flagsOf(cmd);
        await withClient(flags, async (client) => {
          const account = client.profile.account;
          const { data, freshness } = await client.listAccountingJobs({
            startTime: opts.since,
            endTime: opts.until,
            states: opts.state?.split(',').map((s) => s.trim().toUpperCase()),
            jobNames: opts.name?.split(','),
            accounts: account && !opts.allAccounts ? [account] : undefined,
          });
          print(flags, { jobs: data, freshness }, () =>
            data.length === 0
              ? `no jobs since ${new Date(opts.since * 1000).toLocaleString()} (${freshnessNote(freshness)})`
              : `${jobsTable(data)}\n(${count(data.length, 'job')}, ${freshnessNote(freshness)})`,
          );
        });
      },
    );
}
