import { resolve } from 'node:path';
import { z } from 'zod';
import { ConfigError } from '../errors.js';
import { DEFAULT_QUEUE_PREFIX } from '../queue/catalog.js';

/** Settings of `schedflow start`: flags win over environment variables, which win over defaults. */
export const daemonConfigSchema = z.object({
  /** What this process runs: `worker` (submit, poll, reconcile) and `scheduler` (the periodic ticks). Both by default. */
  roles: z
    .array(z.enum(['worker', 'scheduler']))
    .min(1)
    .default(['worker', 'scheduler']),
  /** Where the history, the private Redis and the embedded simulator keep their state. */
  dataDir: z.string().default('./data'),
  /** Folder holding profiles/ (scheduler profiles). */
  configDir: z.string().default('./config'),
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
  /** How long a worker's claim on a job lasts; a job of a worker that died is resumed after this. */
  lockDurationMs: z.number().int().positive().default(30_000),
  /** Time given to running work at shutdown before it is aborted and handed back. */
  shutdownGraceMs: z.number().int().positive().default(10_000),
});
export type DaemonConfig = z.output<typeof daemonConfigSchema>;
export type DaemonConfigInput = z.input<typeof daemonConfigSchema>;

/** Builds the daemon's configuration from the environment and command-line flags. */
export function loadDaemonConfig(env: NodeJS.ProcessEnv, flags: DaemonConfigInput = {}): DaemonConfig {
  const fromEnv: DaemonConfigInput = {
    ...(env.SCHEDFLOW_DATA_DIR && { dataDir: env.SCHEDFLOW_DATA_DIR }),
    ...(env.SCHEDFLOW_CONFIG_DIR && { configDir: env.SCHEDFLOW_CONFIG_DIR }),
    ...(env.REDIS_URL && { redisUrl: env.REDIS_URL }),
  };
  const defined = Object.fromEntries(Object.entries(flags).filter(([, v]) => v !== undefined));
  const parsed = daemonConfigSchema.safeParse({ ...fromEnv, ...defined });
  if (!parsed.success) {
    throw new ConfigError(parsed.error.issues.map((i) => `${i.path.join('.')}: ${i.message}`).join('; '));
  }
  if (parsed.data.roles.length < 2 && !parsed.data.redisUrl) {
    throw new ConfigError('separate worker and scheduler processes share one Redis: set REDIS_URL');
  }
  return { ...parsed.data, dataDir: resolve(parsed.data.dataDir), configDir: resolve(parsed.data.configDir) };
}
