import { join, resolve } from 'node:path';
import { z } from 'zod';
import { DEFAULT_DATA_DIR } from '../daemon-info.js';
import { ConfigError } from '../errors.js';
import { readEnvWholeNumbers } from '../lib/env-numbers.js';
import { LISTEN_ADDRESS_FORM, readListenAddress } from '../lib/listen-address.js';
import { Secret } from '../lib/secret.js';
import { LOG_FORMATS } from '../logger.js';
import { parseWebhookAllowList, WEBHOOK_ALLOW_HOSTS_ENV } from '../notify/webhook-target.js';
import { DEFAULT_QUEUE_PREFIX } from '../queue/catalog.js';
import { FAIR_SHARE_WEIGHTS_ENV, fairShareWeightsFromEnv, fairShareWeightsSchema } from '../queue/fair-share.js';
import { summarySettingsFromEnv, summarySettingsSchema } from '../summaries/summary-settings.js';
import { OIDC_FILE_ENV, oidcSettingsSchema, readOidcFile } from './oidc-settings.js';
import { retentionSchema } from './retention-settings.js';

export const DAEMON_ROLES = ['worker', 'scheduler', 'web'] as const;
export type DaemonRole = (typeof DAEMON_ROLES)[number];

/**
 * Settings of `schedflow start`: flags win over environment variables, which win over defaults.
 * Each `.describe()` is the setting's meaning in docs/configuration.md, whose table of settings
 * is generated from this schema (`npm run docs:settings`), so the words are written for users.
 */
export const daemonConfigSchema = z.object({
  roles: z
    .array(z.enum(DAEMON_ROLES))
    .min(1)
    .default([...DAEMON_ROLES])
    .describe(
      'What this process runs: `worker` (the workers of every queue: submit, poll, reconcile, pipelines, webhooks, summaries), `scheduler` (the periodic ticks), `web` (the local HTTP API and the admin UI). Separate processes need `REDIS_URL` and a profile; the `Procfile` names all three.',
    ),
  listen: z
    .string()
    .refine((text) => readListenAddress(text) !== null, LISTEN_ADDRESS_FORM)
    .default('127.0.0.1:8080')
    .describe('Where the `web` role listens: `host:port` or `[v6]:port` (port 0 picks a free one).'),
  apiRateLimitPerMin: z
    .number()
    .int()
    .positive()
    .default(300)
    .describe('Local API requests per minute per token, and per web UI session; past it, 429 with `Retry-After`.'),
  dataDir: z
    .string()
    .default(DEFAULT_DATA_DIR)
    .describe(
      "The history, the private Redis, the embedded simulator's state, the keys and `daemon.json`; made 0700, its owner's alone.",
    ),
  configDir: z
    .string()
    .default('./config')
    .describe('Folder holding `profiles/*.yaml` (scheduler profiles) and, unless set apart, `pipelines/`.'),
  pipelinesDir: z.string().optional().describe('Pipeline files; unset: `<config>/pipelines`.'),
  pipelineTickMs: z
    .number()
    .int()
    .positive()
    .default(2000)
    .describe(
      'How often active pipeline runs are advanced, missed ticks caught up, deadlines checked and jobs that wait too long moved (`on_pending`).',
    ),
  redisUrl: z
    .url({ protocol: /^rediss?$/ })
    .optional()
    .describe(
      'An external Redis (`redis://` or `rediss://`); unset: a private redis-server on a unix socket in `<data-dir>/redis/`.',
    ),
  queuePrefix: z
    .string()
    .min(1)
    .default(DEFAULT_QUEUE_PREFIX)
    .describe(
      'The Redis key prefix, so several daemons can share one Redis. The processes under one prefix share its queues, request budgets and history: one on another data dir refuses to start while a process of the first runs.',
    ),
  simPort: z
    .number()
    .int()
    .min(0)
    .max(65535)
    .default(6820)
    .describe('Port of the embedded simulator, started only when there is no scheduler profile.'),
  simJobUser: z
    .string()
    .min(1)
    .optional()
    .describe(
      'The unprivileged host user the embedded simulator runs job scripts as when the daemon runs as root (never root): `SCHEDFLOW_SIM_JOB_USER`; unset, `schedflow-job`, which `schedflow setup` creates. A daemon that is not root runs them as itself.',
    ),
  pollFloorMs: z
    .number()
    .int()
    .positive()
    .default(2000)
    .describe(
      "Poll no faster than this, even when the proxy's cache lifetime is shorter; also how often Redis's job schedulers are checked and put back.",
    ),
  pollCeilingMs: z
    .number()
    .int()
    .positive()
    .default(60_000)
    .describe(
      'Poll at least this often, even when the cache lifetime is longer; a profile with nothing to track is pinged this often.',
    ),
  lostGraceMs: z
    .number()
    .int()
    .positive()
    .default(300_000)
    .describe('How long a job may be missing from both the controller and accounting before it is `lost`.'),
  lostResubmits: z
    .number()
    .int()
    .min(0)
    .default(1)
    .describe(
      'How many times a request whose job the controller lost before it started (slurmctld back from a crash without it; no start in any record, and accounting, asked for the job id, agrees: never on a cluster without accounting) is submitted again, as a new attempt; 0: never (it ends `node_fail`, JobLostByController). A job lost after it started is never submitted again by this: its retry policy decides.',
    ),
  pendingDetailsEveryMs: z
    .number()
    .int()
    .min(0)
    .default(30_000)
    .describe(
      "How often a pending job's full controller record is read for Slurm's reason and expected start (one request per job up to 3 due at once, one controller listing of every pending job beyond; giving way for up to 8 intervals to the worker process's submissions while they wait for the request budget or, for a listing, flow); while a job's reason and expected start stay the same, half as often each time, down to every 8th interval; 0: never.",
    ),
  reconcileEveryMs: z
    .number()
    .int()
    .positive()
    .default(60_000)
    .describe("How often each profile's accounting records are imported."),
  clusterViewTtlMs: z
    .number()
    .int()
    .positive()
    .default(30_000)
    .describe(
      "How long one read of a profile's partitions, nodes, reservations or queue serves every viewer of the cluster view (API and UI, every web process): the upstream is read at most once per view per profile per this.",
    ),
  profileRecheckMs: z
    .number()
    .int()
    .positive()
    .default(60_000)
    .describe(
      "How often what a profile's token and user may do, where it could not be told (a scope, the accounts of the user's associations), is asked again; known associations are read again every fifth time.",
    ),
  submitConcurrency: z
    .number()
    .int()
    .positive()
    // Unset: 4 × the profiles' connections, from 16 to 128 (workers/submit.ts). A submission
    // holds a connection for its POST alone, about half of its turn (its history writes and the
    // queue's moves take the rest): with as many in flight as connections, half of them stood
    // idle (bench:slurm, issue 37). Those waiting for a connection have their history writes
    // committed together with the others', a tenth less CPU a submission than with 4
    // (bench:submit, issue 14). The request budget, not this, bounds the pace upstream.
    .optional()
    .describe(
      "Submissions in flight at once, per worker process (each profile's `concurrency` bounds how many of them are sent at once); unset, 4 × the profiles' `concurrency` added up, from 16 to 128.",
    ),
  submitLimitRecheckMs: z
    .number()
    .int()
    .positive()
    .default(15_000)
    .describe('How often the first request held by a submit limit (Slurm error 2050) is offered to Slurm again.'),
  lockDurationMs: z
    .number()
    .int()
    .positive()
    .default(30_000)
    .describe("A worker's claim on a job: the submit of a worker that died is taken up again after about twice this."),
  clusterSampleEveryMs: z
    .number()
    .int()
    .positive()
    .default(300_000)
    .describe(
      "How often each profile's partitions (allocated, idle and other CPUs) are sampled from the cluster view's shared answer into the history, for the Cluster page's allocation chart. The sample reads the cached answer: it costs the scheduler nothing beyond the view's own reads.",
    ),
  clusterSampleKeepMs: z
    .number()
    .int()
    .positive()
    .default(86_400_000)
    .describe('How long the partition samples are kept (and how far back the allocation chart reaches).'),
  retainRequestsMs: retentionSchema(
    '90d',
    'How long an ended request is kept with its transitions, attempts, array tasks, deliveries and summary (a duration: `90d`, `12h`; `off` keeps them for ever). A request not ended, of a pipeline run not ended, or of an attempt chain with an attempt to come is never removed. See docs/operations.md.',
  ),
  retainSummariesMs: retentionSchema(
    '180d',
    'How long a post-job summary is kept: for this long at most, and never past its request or pipeline run.',
  ),
  retainDeliveriesMs: retentionSchema(
    '30d',
    'How long a webhook delivery is kept once delivered or given up (pending ones are kept).',
  ),
  retainAccountingMs: retentionSchema(
    '30d',
    "How long imported accounting records are kept after their job ended (a request not ended keeps its own). A pipeline step's figures the efficiency trends read are kept apart (`job_usage`) and stay.",
  ),
  retainRunsMs: retentionSchema(
    '90d',
    "How long an ended pipeline run is kept with its transitions, deadline misses, deliveries, summary and its steps' kept figures (`job_usage`), once its step requests are gone. A run not ended is never removed, and the last runs of each pipeline its efficiency trend reads (`SCHEDFLOW_SUMMARY_TREND_RUNS`) stay.",
  ),
  retainAuditMs: retentionSchema('400d', 'How long audit rows are kept.'),
  pruneEveryMs: z
    .number()
    .int()
    .positive()
    .default(600_000)
    .describe(
      'How often the history is pruned of what is older than its retention, in small slices (one process at a time, with the queues shared in Redis), and SQLite gives the freed pages back.',
    ),
  shutdownGraceMs: z
    .number()
    .int()
    .positive()
    .default(10_000)
    .describe('At shutdown, the time running work is given before it is aborted and handed back to its queue.'),
  notifyEveryMs: z
    .number()
    .int()
    .positive()
    .default(1000)
    .describe('How often pending webhook deliveries are moved from the history to the `notify` queue.'),
  notifyAttempts: z
    .number()
    .int()
    .positive()
    .default(12)
    .describe('Attempts per webhook delivery before it is failed.'),
  notifyBackoffMs: z
    .number()
    .int()
    .positive()
    .default(2000)
    .describe("Delay before a webhook's first retry; each next one doubles, with jitter."),
  notifyTimeoutMs: z
    .number()
    .int()
    .positive()
    .default(10_000)
    .describe('Time limit of one webhook attempt, from connecting to the end of the answer.'),
  webhookAllowHosts: z
    .array(z.string())
    .default([])
    .superRefine((entries, ctx) => {
      try {
        parseWebhookAllowList(entries);
      } catch (error) {
        ctx.addIssue({ code: 'custom', message: (error as Error).message });
      }
    })
    .describe(
      "Hosts that may be webhook targets although they are the daemon's own host or network (loopback, private, link-local, unique-local; a name that resolves there), comma-separated: names (`hooks.lab.internal`), addresses (`127.0.0.1`) or networks (`10.0.0.0/8`). Others are refused (see docs/webhooks.md).",
    ),
  databaseUrl: z
    .instanceof(Secret)
    .optional()
    .describe(
      'The history on PostgreSQL (`postgres://user:password@host:5432/db`), shared by processes on several hosts, with `REDIS_URL` and `SCHEDFLOW_WEBHOOK_SECRET`; migrated at start. Unset: SQLite, `<data-dir>/history.sqlite`, for one host.',
    ),
  webhookSecret: z
    .instanceof(Secret)
    .optional()
    .describe(
      'The key webhooks are signed with; unset: `<data-dir>/webhook-secret`, made at first start. Required with `DATABASE_URL`, so that every host signs with one key.',
    ),
  uiPassword: z
    .instanceof(Secret)
    .optional()
    .describe(
      'Password of the admin web UI (admin rights); unset: `<data-dir>/ui-password` when that file exists, else tokens only.',
    ),
  oidc: oidcSettingsSchema
    .optional()
    .describe(
      'Single sign-on for the web UI with OpenID Connect (issuer, client, claim mapped to owners and scopes): read from `<config>/oidc.yaml` when that file exists, or from the file `SCHEDFLOW_OIDC_CONFIG` names; unset: token and password logins only. See docs/sso.md.',
    ),
  logFormat: z
    .enum(LOG_FORMATS)
    .optional()
    .describe(
      'How the log on stdout is written: `pretty`, a line to read (time, level, component, message, fields; an error by its message, its stack only at the error level, for a bug, or with `--log-level debug`), or `json`, an object a line (for a journal or a log shipper). Unset: `pretty` on a terminal, `json` otherwise. Secrets are redacted in both.',
    ),
  fairShareWeights: fairShareWeightsSchema
    .default({})
    .describe(
      'Weights of owners in the fair share of submissions (docs/fair-share.md), `owner=weight` comma-separated (`lab-a=2,lab-b=0.5`): an owner of weight 2 is served twice a round. Unlisted owners: 1.',
    ),
  // Built by summarySettingsFromEnv (src/summaries/summary-settings.ts) from variables of its own.
  summaries: summarySettingsSchema
    .prefault({})
    .describe(
      'Post-job summaries and the LLM endpoint that writes them, from variables of their own: `SCHEDFLOW_SUMMARIES`, `SCHEDFLOW_SUMMARY_*`, `SCHEDFLOW_LLM_*`, `SCHEDFLOW_REDACT_PATTERNS`.',
    ),
});
/** As loaded: paths absolute, the pipelines folder resolved. */
export type DaemonConfig = Omit<z.output<typeof daemonConfigSchema>, 'pipelinesDir'> & { pipelinesDir: string };
export type DaemonConfigInput = z.input<typeof daemonConfigSchema>;

/** Tuning settings read from the environment (whole milliseconds, or a count). */
export const DAEMON_ENV_NUMBERS = {
  SCHEDFLOW_POLL_FLOOR_MS: 'pollFloorMs',
  SCHEDFLOW_POLL_CEILING_MS: 'pollCeilingMs',
  SCHEDFLOW_LOST_GRACE_MS: 'lostGraceMs',
  SCHEDFLOW_LOST_RESUBMITS: 'lostResubmits',
  SCHEDFLOW_PENDING_DETAILS_EVERY_MS: 'pendingDetailsEveryMs',
  SCHEDFLOW_RECONCILE_EVERY_MS: 'reconcileEveryMs',
  SCHEDFLOW_PROFILE_RECHECK_MS: 'profileRecheckMs',
  SCHEDFLOW_SUBMIT_CONCURRENCY: 'submitConcurrency',
  SCHEDFLOW_SUBMIT_LIMIT_RECHECK_MS: 'submitLimitRecheckMs',
  SCHEDFLOW_LOCK_DURATION_MS: 'lockDurationMs',
  SCHEDFLOW_SHUTDOWN_GRACE_MS: 'shutdownGraceMs',
  SCHEDFLOW_PIPELINE_TICK_MS: 'pipelineTickMs',
  SCHEDFLOW_NOTIFY_EVERY_MS: 'notifyEveryMs',
  SCHEDFLOW_NOTIFY_ATTEMPTS: 'notifyAttempts',
  SCHEDFLOW_NOTIFY_BACKOFF_MS: 'notifyBackoffMs',
  SCHEDFLOW_NOTIFY_TIMEOUT_MS: 'notifyTimeoutMs',
  SCHEDFLOW_API_RATE_LIMIT: 'apiRateLimitPerMin',
  SCHEDFLOW_PRUNE_EVERY_MS: 'pruneEveryMs',
} as const satisfies Record<string, keyof DaemonConfig>;

/** Builds the daemon's configuration from the environment and command-line flags. */
export function loadDaemonConfig(env: NodeJS.ProcessEnv, flags: DaemonConfigInput = {}): DaemonConfig {
  const fromEnv: Record<string, unknown> = {
    ...(env.SCHEDFLOW_DATA_DIR && { dataDir: env.SCHEDFLOW_DATA_DIR }),
    ...(env.SCHEDFLOW_CONFIG_DIR && { configDir: env.SCHEDFLOW_CONFIG_DIR }),
    ...(env.SCHEDFLOW_LOG_FORMAT?.trim() && { logFormat: env.SCHEDFLOW_LOG_FORMAT.trim() }),
    ...(env.SCHEDFLOW_PIPELINES_DIR && { pipelinesDir: env.SCHEDFLOW_PIPELINES_DIR }),
    ...(env.SCHEDFLOW_QUEUE_PREFIX && { queuePrefix: env.SCHEDFLOW_QUEUE_PREFIX }),
    ...(env.REDIS_URL && { redisUrl: env.REDIS_URL }),
    ...(env.SCHEDFLOW_LISTEN?.trim() && { listen: env.SCHEDFLOW_LISTEN.trim() }),
    ...(env.DATABASE_URL?.trim() && { databaseUrl: new Secret(env.DATABASE_URL.trim()) }),
    ...(env.SCHEDFLOW_WEBHOOK_SECRET?.trim() && { webhookSecret: new Secret(env.SCHEDFLOW_WEBHOOK_SECRET.trim()) }),
    ...(env.SCHEDFLOW_UI_PASSWORD && { uiPassword: new Secret(env.SCHEDFLOW_UI_PASSWORD) }),
    ...(env.SCHEDFLOW_WEBHOOK_ALLOW_HOSTS?.trim() && {
      webhookAllowHosts: env.SCHEDFLOW_WEBHOOK_ALLOW_HOSTS.split(',')
        .map((entry) => entry.trim())
        .filter(Boolean),
    }),
    ...(env.SCHEDFLOW_SIM_JOB_USER?.trim() && { simJobUser: env.SCHEDFLOW_SIM_JOB_USER.trim() }),
    ...(env.SCHEDFLOW_RETAIN_REQUESTS?.trim() && { retainRequestsMs: env.SCHEDFLOW_RETAIN_REQUESTS.trim() }),
    ...(env.SCHEDFLOW_RETAIN_SUMMARIES?.trim() && { retainSummariesMs: env.SCHEDFLOW_RETAIN_SUMMARIES.trim() }),
    ...(env.SCHEDFLOW_RETAIN_DELIVERIES?.trim() && { retainDeliveriesMs: env.SCHEDFLOW_RETAIN_DELIVERIES.trim() }),
    ...(env.SCHEDFLOW_RETAIN_ACCOUNTING?.trim() && { retainAccountingMs: env.SCHEDFLOW_RETAIN_ACCOUNTING.trim() }),
    ...(env.SCHEDFLOW_RETAIN_RUNS?.trim() && { retainRunsMs: env.SCHEDFLOW_RETAIN_RUNS.trim() }),
    ...(env.SCHEDFLOW_RETAIN_AUDIT?.trim() && { retainAuditMs: env.SCHEDFLOW_RETAIN_AUDIT.trim() }),
    summaries: summarySettingsFromEnv(env),
    fairShareWeights: fairShareWeightsFromEnv(env),
  };
  const defined = Object.fromEntries(Object.entries(flags).filter(([, v]) => v !== undefined));
  if (!('oidc' in defined)) {
    const oidc = readOidcFile(env, String(defined.configDir ?? fromEnv.configDir ?? './config'));
    if (oidc !== undefined) fromEnv.oidc = oidc;
  }
  // A variable a flag overrides is not read: the flag wins, even over a typo in the environment.
  const numbers = Object.entries(DAEMON_ENV_NUMBERS).filter(([, key]) => !(key in defined));
  Object.assign(fromEnv, readEnvWholeNumbers(env, Object.fromEntries(numbers)));
  const parsed = daemonConfigSchema.safeParse({ ...fromEnv, ...defined });
  if (!parsed.success) {
    throw new ConfigError(parsed.error.issues.map((i) => `${settingName(i.path)}: ${i.message}`).join('; '));
  }
  if (!isAllInOne(parsed.data.roles) && !parsed.data.redisUrl) {
    throw new ConfigError('processes with separate roles (worker, scheduler, web) share one Redis: set REDIS_URL');
  }
  if (parsed.data.databaseUrl) checkDatabaseUrl(parsed.data.databaseUrl, parsed.data);
  if (parsed.data.oidc && !parsed.data.oidc.redirectUrl && unspecifiedHost(parsed.data.listen)) {
    throw new ConfigError(
      `oidc.redirectUrl: the daemon listens on every address (${parsed.data.listen}); say the URL the identity provider sends browsers back to`,
    );
  }
  const configDir = resolve(parsed.data.configDir);
  return {
    ...parsed.data,
    dataDir: resolve(parsed.data.dataDir),
    configDir,
    pipelinesDir: resolve(parsed.data.pipelinesDir ?? join(configDir, 'pipelines')),
  };
}

/**
 * A PostgreSQL URL, and what hosts sharing it need besides: one Redis (each host's private one
 * would queue, and submit, the others' requests again: a job twice), and one webhook secret
 * (each would otherwise make a file of its own and sign with it, and receivers would refuse
 * every other host's deliveries).
 */
function checkDatabaseUrl(
  url: Secret,
  { redisUrl, webhookSecret }: { redisUrl?: string; webhookSecret?: Secret },
): void {
  let protocol: string;
  try {
    protocol = new URL(url.reveal()).protocol;
  } catch {
    // Never the value: it holds a password.
    throw new ConfigError('DATABASE_URL is not a URL: give postgres://user:password@host:5432/database');
  }
  if (protocol !== 'postgres:' && protocol !== 'postgresql:') {
    throw new ConfigError(`DATABASE_URL must be a postgres:// URL (got ${protocol}//…); unset it for SQLite`);
  }
  if (!redisUrl) {
    throw new ConfigError(
      'with DATABASE_URL (a history shared by several hosts), set REDIS_URL to the Redis they share: a private Redis per host would submit the same requests again',
    );
  }
  if (!webhookSecret) {
    throw new ConfigError(
      'with DATABASE_URL (a history shared by several hosts), set SCHEDFLOW_WEBHOOK_SECRET to the same key on every host: webhooks must be signed with one key',
    );
  }
}

/** The variables of the retention settings. */
const RETENTION_ENV: Record<string, string> = {
  retainRequestsMs: 'SCHEDFLOW_RETAIN_REQUESTS',
  retainSummariesMs: 'SCHEDFLOW_RETAIN_SUMMARIES',
  retainDeliveriesMs: 'SCHEDFLOW_RETAIN_DELIVERIES',
  retainAccountingMs: 'SCHEDFLOW_RETAIN_ACCOUNTING',
  retainRunsMs: 'SCHEDFLOW_RETAIN_RUNS',
  retainAuditMs: 'SCHEDFLOW_RETAIN_AUDIT',
};

/** The name a user set: the environment variable for tuning settings and the webhook allow-list, else the setting's key. */
function settingName(path: PropertyKey[]): string {
  const key = String(path[0]);
  const envName = Object.entries(DAEMON_ENV_NUMBERS).find(([, k]) => k === key)?.[0];
  if (key === 'webhookAllowHosts') return WEBHOOK_ALLOW_HOSTS_ENV;
  if (key === 'logFormat') return 'SCHEDFLOW_LOG_FORMAT';
  if (key === 'fairShareWeights') return FAIR_SHARE_WEIGHTS_ENV;
  const retention = RETENTION_ENV[key];
  if (retention) return retention;
  if (key === 'oidc') return `oidc (${OIDC_FILE_ENV} or <config>/oidc.yaml) ${path.slice(1).join('.')}`.trim();
  return envName ?? path.join('.');
}

/** Worker and scheduler in one process: the only start that may use a private Redis and the embedded simulator. */
export function isAllInOne(roles: readonly DaemonRole[]): boolean {
  return roles.includes('worker') && roles.includes('scheduler');
}

/** A listen address on every interface: no URL a browser could be sent back to can be made of it. */
function unspecifiedHost(listen: string): boolean {
  const host = readListenAddress(listen)?.host;
  return host === '0.0.0.0' || host === '::' || host === '';
}

/** The history's retention as the pruner and `schedflow db stats` read it (src/db/retention.ts). */
export function retentionOf(config: DaemonConfig) {
  return {
    requestsMs: config.retainRequestsMs,
    summariesMs: config.retainSummariesMs,
    deliveriesMs: config.retainDeliveriesMs,
    accountingMs: config.retainAccountingMs,
    runsMs: config.retainRunsMs,
    // The runs a pipeline's efficiency trend reads stay.
    keepRunsPerPipeline: config.summaries.trendRuns,
    auditMs: config.retainAuditMs,
  };
}
