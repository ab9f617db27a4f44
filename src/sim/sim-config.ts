import { readFileSync, statSync } from 'node:fs';
import { dirname, isAbsolute, resolve } from 'node:path';
import { z } from 'zod';
import { ConfigError } from '../errors.js';
import { issuesText } from '../lib/issues-text.js';
import { readYamlSource, SourceError } from '../lib/yaml-source.js';
import { SUPPORTED_VERSIONS } from '../sched/versions.js';

export const SCOPES = ['sched:read', 'scheddb:read', 'sched:jobs:manage'] as const;
export type Scope = (typeof SCOPES)[number];

export const partitionSchema = z.object({
  name: z.string().min(1),
  default: z.boolean().optional(),
  /** Accounts allowed to submit here (slurm.conf AllowAccounts); absent means all. */
  allowAccounts: z.array(z.string()).optional(),
  /** Minutes; null or absent means UNLIMITED. */
  maxTimeMin: z.number().int().positive().nullable().optional(),
  /** Minutes given to jobs that ask for none; absent means the maximum. */
  defaultTimeMin: z.number().int().positive().nullable().optional(),
});
export type PartitionSettings = z.infer<typeof partitionSchema>;

/** A cluster user: uid, and what `sacctmgr add user` would give them. */
export const simUserSchema = z.object({
  uid: z.number().int().nonnegative(),
  /** Account charged when a job names none (sacctmgr DefaultAccount). */
  defaultAccount: z.string().optional(),
  /**
   * Accounts the user has an association with; a job naming another is refused (2045).
   * Absent: the default account only, or any account when there is no default either.
   */
  accounts: z.array(z.string()).optional(),
  /**
   * Jobs the user may have pending or running at once (the association's MaxSubmitJobs); one
   * more is refused with 2050 until one ends. Absent: no limit. PUT /_sim/users/<name> changes it.
   */
  maxSubmitJobs: z.number().int().nonnegative().optional(),
  /**
   * sacctmgr AdminLevel: an Operator or Administrator may raise a time limit past the
   * partition's MaxTime or a running job's, and set a negative nice. @defaultValue None
   */
  adminLevel: z.enum(['None', 'Operator', 'Administrator']).optional(),
});
export type SimUser = z.infer<typeof simUserSchema>;

const ttl = z.number().int().min(2).max(60);

/** Seconds each GET endpoint is cached by the proxy (the contract allows 2 to 60). */
export const cacheTtlSchema = z.object({
  jobs: ttl.default(5),
  job: ttl.default(5),
  jobsState: ttl.default(2),
  ping: ttl.default(2),
  /** `/meta/versions/*`, which change only when the proxy is upgraded. */
  meta: ttl.default(60),
  partitions: ttl.default(60),
  nodes: ttl.default(30),
  dbJobs: ttl.default(30),
  dbJob: ttl.default(30),
});
export type CacheTtls = z.infer<typeof cacheTtlSchema>;
export type CachedEndpoint = keyof CacheTtls;

export const simConfigSchema = z.object({
  host: z.string().default('127.0.0.1'),
  port: z.number().int().min(0).max(65535).default(6820),
  /** JSON file mapping bearer tokens to user, account and scopes. */
  tokensFile: z.string().optional(),
  stateDir: z.string().default('./data/sim'),
  /** Where jobs that name no current_working_directory run; default: a folder of this simulator's own under the temporary folder. */
  workDir: z.string().optional(),
  clusterName: z.string().default('sim'),
  nodeName: z.string().default('sim-node1'),
  cpus: z.number().int().positive().default(4),
  memoryMb: z.number().int().positive().default(8192),
  partitions: z
    .array(partitionSchema)
    .min(1)
    .default([{ name: 'debug', default: true }]),
  /** Cluster users, with what slurmdbd's associations say about them. */
  users: z.record(z.string(), simUserSchema).default({}),
  cacheTtlSec: cacheTtlSchema.default(cacheTtlSchema.parse({})),
  /** Per-client-IP token bucket. */
  rateLimit: z
    .object({ capacity: z.number().positive().default(100), refillPerSecond: z.number().nonnegative().default(20) })
    .default({ capacity: 100, refillPerSecond: 20 }),
  timeScale: z.number().positive().default(1),
  minJobAgeSec: z.number().nonnegative().default(300),
  killWaitSec: z.number().nonnegative().default(5),
  firstJobId: z.number().int().positive().default(1000),
  /** slurm.conf MaxArraySize: array indexes go from 0 to one less. */
  maxArraySize: z.number().int().positive().default(1001),
  /** Data-parser versions served (a site may serve fewer); the newest is `latest`. */
  versions: z
    .array(z.enum(SUPPORTED_VERSIONS))
    .min(1)
    .default([...SUPPORTED_VERSIONS]),
  /**
   * Seconds between samples of a running job's usage (slurm.conf JobAcctGatherFrequency); a job
   * that ends sooner has none in accounting. Slurm's default is 30; the simulator's jobs are short.
   */
  jobAcctGatherFrequencySec: z.number().nonnegative().default(1),
  /** Benchmark mode: do not execute scripts; every job runs this many seconds and completes. */
  simulatedRuntimeSec: z.number().nonnegative().optional(),
  /**
   * The host user job scripts run as when the simulator runs as root (never root itself): as
   * slurmd runs a job as its submitter, not as root. Default `schedflow-job` (src/sim/job-user.ts).
   * A simulator that is not root runs them as its own user and takes no other.
   */
  jobUser: z.string().min(1).optional(),
  /**
   * Which API it serves: `both` (the default: the proxy's `/sched`, `/scheddb`, `/meta`, `/ping`
   * beside plain slurmrestd's `/slurm`, `/slurmdb`), or only `proxy` or only `slurmrestd` (then it
   * answers every other path as that one would): a site has one or the other at an address, and a
   * profile whose `flavor` is the other one is told so at start (src/sched/profile-check.ts).
   */
  serves: z.enum(['both', 'proxy', 'slurmrestd']).default('both'),
  /** Accept `Authorization: MUNGE` (needs munge's `unmunge`). */
  munge: z.boolean().default(true),
  /** The OpenAI-compatible LLM endpoint (`/v1/...`, src/sim/llm); served when its keys are given. */
  llm: z
    .object({
      /** API keys, one a line, in a file only its owner can read. */
      keysFile: z.string().optional(),
      /** Models served; the first is the demo's. */
      models: z.array(z.string().min(1)).min(1).default(['sim-summarizer']),
      /** Serve `GET /v1/models`. */
      listModels: z.boolean().default(true),
    })
    .optional(),
});
export type SimConfig = z.infer<typeof simConfigSchema>;
export type SimConfigInput = z.input<typeof simConfigSchema>;

export const tokenEntrySchema = z.object({
  user: z.string().min(1),
  account: z.string().min(1),
  scopes: z.array(z.enum(SCOPES)),
});
export type TokenEntry = z.infer<typeof tokenEntrySchema>;
export const tokensFileSchema = z.record(z.string(), tokenEntrySchema);

/** Tokens are opaque and non-guessable (contract section 2); refuse short ones. */
export const MIN_TOKEN_LENGTH = 16;

/** A simulator settings file or value that cannot be used: a configuration mistake like any other. */
export class SimConfigError extends ConfigError {}

/**
 * Reads a JSON or YAML file of simulator settings. Relative paths in it
 * (tokensFile, stateDir) are relative to the file, not to the current directory.
 */
export function readSimConfigFile(path: string): SimConfigInput {
  let data: unknown;
  try {
    data = readYamlSource(path).data;
  } catch (error) {
    if (error instanceof SourceError) throw new SimConfigError(error.message);
    throw new SimConfigError(`cannot read simulator config ${path}: ${(error as Error).message}`);
  }
  // Strict, so a misspelt key is reported instead of silently ignored.
  const parsed = simConfigSchema
    .partial()
    .strict()
    .safeParse(data ?? {});
  if (!parsed.success) throw new SimConfigError(`${path}: ${issuesText(parsed.error)}`);
  const input = { ...(data as SimConfigInput) };
  const base = dirname(path);
  if (input.tokensFile && !isAbsolute(input.tokensFile)) input.tokensFile = resolve(base, input.tokensFile);
  if (input.stateDir && !isAbsolute(input.stateDir)) input.stateDir = resolve(base, input.stateDir);
  if (input.workDir && !isAbsolute(input.workDir)) input.workDir = resolve(base, input.workDir);
  if (input.llm?.keysFile && !isAbsolute(input.llm.keysFile)) {
    input.llm = { ...input.llm, keysFile: resolve(base, input.llm.keysFile) };
  }
  return input;
}

export function parseSimConfig(input: SimConfigInput): SimConfig {
  const parsed = simConfigSchema.safeParse(input);
  if (!parsed.success) throw new SimConfigError(`simulator settings: ${issuesText(parsed.error)}`);
  return parsed.data;
}

/** Loads the tokens file; refuses one that other users can read, since it holds secrets. */
export function loadTokensFile(path: string): Map<string, TokenEntry> {
  let text: string;
  try {
    if ((statSync(path).mode & 0o077) !== 0) {
      throw new SimConfigError(`tokens file ${path} is readable by other users; run: chmod 600 ${path}`);
    }
    text = readFileSync(path, 'utf8');
  } catch (error) {
    if (error instanceof SimConfigError) throw error;
    const missing = (error as NodeJS.ErrnoException).code === 'ENOENT';
    throw new SimConfigError(
      missing
        ? `tokens file ${path} does not exist (from --tokens or tokensFile); create it: {"<token>": {"user": "...", "account": "...", "scopes": ["sched:read", "scheddb:read", "sched:jobs:manage"]}}, mode 600`
        : `cannot read tokens file ${path}: ${(error as Error).message}`,
    );
  }
  let data: unknown;
  try {
    data = JSON.parse(text);
  } catch (error) {
    throw new SimConfigError(`tokens file ${path} is not JSON: ${(error as Error).message}`);
  }
  const parsed = tokensFileSchema.safeParse(data);
  if (!parsed.success) {
    // The first path segment is the token itself: name entries by position so no token is echoed.
    const keys = data && typeof data === 'object' ? Object.keys(data) : [];
    const where = (segment: PropertyKey | undefined) => `entry #${keys.indexOf(String(segment)) + 1}`;
    const problems = parsed.error.issues.map(
      (i) => `${i.path.length ? [where(i.path[0]), ...i.path.slice(1)].join('.') : '(root)'}: ${i.message}`,
    );
    throw new SimConfigError(`tokens file ${path}: ${problems.join('; ')}`);
  }
  const entries = Object.entries(parsed.data);
  const short = entries.findIndex(([token]) => token.length < MIN_TOKEN_LENGTH);
  if (short >= 0) {
    throw new SimConfigError(
      `tokens file ${path}: entry #${short + 1}: tokens must be at least ${MIN_TOKEN_LENGTH} characters`,
    );
  }
  return new Map(entries);
}
