import { join, resolve } from 'node:path';
import { z } from 'zod';
import { ConfigError } from '../errors.js';
import { Secret } from '../lib/secret.js';
import { DEFAULT_QUEUE_PREFIX } from '../queue/catalog.js';
import { summarySettingsFromEnv, summarySettingsSchema } from '../summaries/summary-settings.js';

export const DAEMON_ROLES = ['worker', 'scheduler', 'web'] as const;
export type DaemonRole = (typeof DAEMON_ROLES)[number];

/** Settings of `schedflow start`: flags win over environment variables, which win over defaults. */
export const daemonConfigSchema = z.object({
  /**
   * What this process runs: `worker` (submit, poll, reconcile), `scheduler` (the
   * periodic ticks) and `web` (the local HTTP API). All three by default.
   */
  roles: z
    .array(z.enum(DAEMON_ROLES))
    .min(1)
    .default([...DAEMON_ROLES]),
  /** Where the local API listens (`web` role): `host:port`, `[v6]:port`; port 0 picks a free one. */
  listen: z
    .string()
    .regex(/^(?:\[[0-9a-fA-F:.]+\]|[^\s:[\]]+):\d{1,5}$/, 'host:port, e.g. 127.0.0.1:8080')
    .default('127.0.0.1:8080'),
  /** Local API requests per minute per token. */
  apiRateLimitPerMin: z.number().int().positive().default(300),
  /** Where the history, the private Redis and the embedded simulator keep their state. */
  dataDir: z.string().default('./data'),
  /** Folder holding profiles/ (scheduler profiles). */
  configDir: z.string().default('./config'),
  /** Pipeline files; default `<configDir>/pipelines`. */
  pipelinesDir: z.string().optional(),
  /** How often active pipeline runs are advanced, missed ticks caught up and deadlines checked. */
  pipelineTickMs: z.number().int().positive().default(2000),
  /** An external Redis; without it schedflow starts its own redis-server. */
  redisUrl: z.url({ protocol: /^rediss?$/ }).optional(),
  queuePrefix: z.string().min(1).default(DEFAULT_QUEUE_PREFIX),
  /** Port of the embedded simulator, when no profile is configured. */
  simPort: z.number().int().min(0).max(65535).default(6820),
  /** Poll no faster than this, even when the proxy's cache lifetime is shorter. */
  pollFloorMs: z.number().int().positive().default(2000),
  /** Poll at least this often, even when the cache lifetime is longer. */
  pollCeilingMs: z.number().int().positive().default(60_000),
  /** A job missing from controller and accounting this long becomes `lost`. */
  lostGraceMs: z.number().int().positive().default(300_000),
  reconcileEveryMs: z.number().int().positive().default(60_000),
  submitConcurrency: z.number().int().positive().default(4),
  /** How often the first request held by a submit limit (Slurm error 2050) is offered to Slurm again. */
  submitLimitRecheckMs: z.number().int().positive().default(15_000),
  /** How long a worker's claim on a job lasts; a job of a worker that died is resumed after this. */
  lockDurationMs: z.number().int().positive().default(30_000),
  /** Time given to running work at shutdown before it is aborted and handed back. */
  shutdownGraceMs: z.number().int().positive().default(10_000),
  /** How often pending webhook deliveries are moved from the history to the notify queue. */
  notifyEveryMs: z.number().int().positive().default(1000),
  /** Attempts per webhook delivery before it is failed. */
  notifyAttempts: z.number().int().positive().default(12),
  /** Delay before a webhook's first retry; each next one doubles (with jitter). */
  notifyBackoffMs: z.number().int().positive().default(2000),
  /** Time limit of one webhook attempt, connecting to end of answer. */
  notifyTimeoutMs: z.number().int().positive().default(10_000),
  /** Key webhooks are signed with (SCHEDFLOW_WEBHOOK_SECRET); else `<dataDir>/webhook-secret`. */
  webhookSecret: z.instanceof(Secret).optional(),
  /** Password of the admin web UI (SCHEDFLOW_UI_PASSWORD); else `<dataDir>/ui-password` when it exists; else tokens only. */
  uiPassword: z.instanceof(Secret).optional(),
  /** Post-job summaries and the LLM endpoint (SCHEDFLOW_SUMMARIES, SCHEDFLOW_LLM_*; src/summaries/summary-settings.ts). */
  summaries: summarySettingsSchema.prefault({}),
});
/** As loaded: paths absolute, the pipelines folder resolved. */
export type DaemonConfig = Omit<z.output<typeof daemonConfigSchema>, 'pipelinesDir'> & { pipelinesDir: string };
export type DaemonConfigInput = z.input<typeof daemonConfigSchema>;

/** Tuning settings read from the environment (whole milliseconds, or a count). */
export const DAEMON_ENV_NUMBERS = {
  SCHEDFLOW_POLL_FLOOR_MS: 'pollFloorMs',
  SCHEDFLOW_POLL_CEILING_MS: 'pollCeilingMs',
  SCHEDFLOW_LOST_GRACE_MS: 'lostGraceMs',
  SCHEDFLOW_RECONCILE_EVERY_MS: 'reconcileEveryMs',
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
} as const satisfies Record<string, keyof DaemonConfig>;

/** Builds the daemon's configuration from the environment and command-line flags. */
export function loadDaemonConfig(env: NodeJS.ProcessEnv, flags: DaemonConfigInput = {}): DaemonConfig {
  const fromEnv: Record<string, unknown> = {
    ...(env.SCHEDFLOW_DATA_DIR && { dataDir: env.SCHEDFLOW_DATA_DIR }),
    ...(env.SCHEDFLOW_CONFIG_DIR && { configDir: env.SCHEDFLOW_CONFIG_DIR }),
    ...(env.SCHEDFLOW_PIPELINES_DIR && { pipelinesDir: env.SCHEDFLOW_PIPELINES_DIR }),
    ...(env.SCHEDFLOW_QUEUE_PREFIX && { queuePrefix: env.SCHEDFLOW_QUEUE_PREFIX }),
    ...(env.REDIS_URL && { redisUrl: env.REDIS_URL }),
    ...(env.SCHEDFLOW_LISTEN?.trim() && { listen: env.SCHEDFLOW_LISTEN.trim() }),
    ...(env.SCHEDFLOW_WEBHOOK_SECRET?.trim() && { webhookSecret: new Secret(env.SCHEDFLOW_WEBHOOK_SECRET.trim()) }),
    ...(env.SCHEDFLOW_UI_PASSWORD && { uiPassword: new Secret(env.SCHEDFLOW_UI_PASSWORD) }),
    summaries: summarySettingsFromEnv(env),
  };
  for (const [name, key] of Object.entries(DAEMON_ENV_NUMBERS)) {
    const raw = env[name]?.trim();
    if (!raw) continue;
    // Kept as text when not a number, so the error below names the variable's setting.
    fromEnv[key] = /^\d+$/.test(raw) ? Number(raw) : raw;
  }
  const defined = Object.fromEntries(Object.entries(flags).filter(([, v]) => v !== undefined));
  const parsed = daemonConfigSchema.safeParse({ ...fromEnv, ...defined });
  if (!parsed.success) {
    throw new ConfigError(parsed.error.issues.map((i) => `${settingName(i.path)}: ${i.message}`).join('; '));
  }
  if (!isAllInOne(parsed.data.roles) && !parsed.data.redisUrl) {
    throw new ConfigError('processes with separate roles (worker, scheduler, web) share one Redis: set REDIS_URL');
  }
  const configDir = resolve(parsed.data.configDir);
  return {
    ...parsed.data,
    dataDir: resolve(parsed.data.dataDir),
    configDir,
    pipelinesDir: resolve(parsed.data.pipelinesDir ?? join(configDir, 'pipelines')),
  };
}

/** The name a user set: the environment variable for tuning settings, else the setting's key. */
function settingName(path: PropertyKey[]): string {
  const key = String(path[0]);
  const envName = Object.entries(DAEMON_ENV_NUMBERS).find(([, k]) => k === key)?.[0];
  return envName ?? path.join('.');
}

/** Worker and scheduler in one process: the only start that may use a private Redis and the embedded simulator. */
export function isAllInOne(roles: readonly DaemonRole[]): boolean {
  return roles.includes('worker') && roles.includes('scheduler');
}
