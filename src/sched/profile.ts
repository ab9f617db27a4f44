import { readdirSync, readFileSync, type Stats, statSync } from 'node:fs';
import { basename, extname, join } from 'node:path';
import { z } from 'zod';
import { ConfigError } from '../errors.js';
import { issuesText } from '../lib/issues-text.js';
import { refuseSharedAccess } from '../lib/owner-only.js';
import { Secret } from '../lib/secret.js';
import { locate, parseSource, readYamlSource } from '../lib/yaml-source.js';
import { DEFAULT_MAX_ARRAY_SIZE, MAX_ARRAY_SIZE_LIMIT } from './job-array.js';
import { parseMemoryMb, parseTimeLimit } from './job-spec.js';

/**
 * A scheduler profile: one cluster (or one token on it). Profiles live in
 * `config/profiles/<name>.yaml`; secrets are named there (an environment
 * variable or a file), never written there.
 */
const secretSource = {
  /** Name of an environment variable holding the token. */
  tokenEnv: z.string().min(1).optional(),
  /** Path of a file holding the token; it must not be readable by other users. */
  tokenFile: z.string().min(1).optional(),
};

const authSchema = z.discriminatedUnion('type', [
  z.object({ type: z.literal('bearer'), ...secretSource }).strict(),
  z.object({ type: z.literal('header-pair'), user: z.string().min(1), ...secretSource }).strict(),
  z.object({ type: z.literal('munge') }).strict(),
]);

/** A limit in Slurm's notation (minutes or `4:00:00`, MB or `16G`), as a number. */
function limitNotation(parse: (value: number | string) => number | 'infinite') {
  return z.union([z.number().int().positive(), z.string()]).transform((value, ctx): number => {
    try {
      const parsed = parse(value);
      return parsed === 'infinite' ? Number.POSITIVE_INFINITY : parsed;
    } catch (error) {
      ctx.addIssue({ code: 'custom', message: (error as Error).message });
      return z.NEVER;
    }
  });
}

export const profileSchema = z
  .object({
    url: z.url(),
    /** `proxy`: the site proxy (/sched, /scheddb); `slurmrestd`: plain slurmrestd (/slurm, /slurmdb). */
    flavor: z.enum(['proxy', 'slurmrestd']).default('proxy'),
    auth: authSchema,
    /** A pinned data-parser version (`v0.0.44`), or `latest`, resolved at start. */
    version: z
      .string()
      .regex(/^(v0\.0\.\d+|latest)$/, 'must be v0.0.XX or latest')
      .default('latest'),
    /** The account the token is bound to; jobs are charged to it unless they name another. */
    account: z.string().min(1).optional(),
    /**
     * The scopes the token carries, as the operator's staff issued it: when given, schedflow
     * believes it instead of learning them from the proxy's answers at start (see
     * docs/profiles.md#scopes). Only for a token sent to the site proxy.
     */
    scopes: z.array(z.enum(['sched:read', 'scheddb:read', 'sched:jobs:manage'])).optional(),
    /** The partition jobs go to unless they name one (a node owner's partition). */
    partition: z.string().min(1).optional(),
    /**
     * Partitions' limits (MaxTime, MaxMemPerNode), as the cluster's slurm.conf sets them: a retry
     * policy never grows a job's time_limit or memory_per_node past them. Keyed by partition.
     */
    partitionLimits: z
      .record(
        z.string().min(1),
        z
          .object({
            maxTime: limitNotation(parseTimeLimit).optional(),
            maxMemoryPerNode: limitNotation(parseMemoryMb).optional(),
          })
          .strict(),
      )
      .default({}),
    /**
     * The cluster's `MaxArraySize` (slurm.conf): array indexes go from 0 to one less, so no array
     * has more tasks. An array over it is refused at the door, before anything is recorded; the
     * scheduler would refuse it anyway (error 2081). No endpoint of slurmrestd's v0.0.42–44 API
     * reports the setting (`/diag` gives statistics, `/slurmdb/config` accounting's entities, and
     * there is no slurm.conf endpoint), so the profile says it.
     * @defaultValue 1001, Slurm's default
     */
    maxArraySize: z.number().int().min(1).max(MAX_ARRAY_SIZE_LIMIT).default(DEFAULT_MAX_ARRAY_SIZE),
    /** Client-side budget, kept below the proxy's per-IP limit. */
    rateLimit: z
      .object({
        capacity: z.number().positive().default(10),
        refillPerSecond: z.number().positive().default(5),
      })
      .strict()
      .default({ capacity: 10, refillPerSecond: 5 }),
    /** At most this many requests in flight (pool connections). */
    concurrency: z.number().int().positive().default(4),
    timeouts: z
      .object({
        connectMs: z.number().int().positive().default(5000),
        requestMs: z.number().int().positive().default(30_000),
      })
      .strict()
      .default({ connectMs: 5000, requestMs: 30_000 }),
    retries: z
      .object({
        attempts: z.number().int().min(1).default(4),
        baseDelayMs: z.number().int().positive().default(500),
        maxDelayMs: z.number().int().positive().default(30_000),
      })
      .strict()
      .default({ attempts: 4, baseDelayMs: 500, maxDelayMs: 30_000 }),
  })
  .strict();

export type ProfileInput = z.input<typeof profileSchema>;
export type ProfileSettings = z.output<typeof profileSchema>;
export type AuthSettings = ProfileSettings['auth'];

export interface Profile extends ProfileSettings {
  name: string;
}

export function parseProfile(name: string, input: unknown, where = `profile "${name}"`): Profile {
  const parsed = profileSchema.safeParse(input);
  if (!parsed.success) throw new ConfigError(`${where}: ${issuesText(parsed.error)}`);
  return checkedProfile(name, parsed.data, where);
}

/** What the schema alone cannot say; `where` names the profile, or its `auth:` in its file (file:line:column). */
function checkedProfile(name: string, settings: ProfileSettings, where: string): Profile {
  const auth = settings.auth;
  if (auth.type !== 'munge' && !auth.tokenEnv === !auth.tokenFile) {
    throw new ConfigError(`${where}: auth needs exactly one of tokenEnv or tokenFile`);
  }
  return { name, ...settings };
}

/**
 * A profile file, read the way job and pipeline files are (src/lib/yaml-source.ts): every
 * problem on its own line with file:line:column, an unknown key with the field it is a slip
 * for (`acount:` → "did you mean "account"?").
 */
export function readProfileFile(file: string): Profile {
  const source = readYamlSource(file);
  const settings = parseSource(source, profileSchema);
  return checkedProfile(basename(file, extname(file)), settings, locate(source, ['auth']));
}

/** Reads every `*.yaml`/`*.yml`/`*.json` in a directory; the file name is the profile name. */
export function loadProfiles(dir: string): Map<string, Profile> {
  const profiles = new Map<string, Profile>();
  let files: string[];
  try {
    files = readdirSync(dir).filter((f) => ['.yaml', '.yml', '.json'].includes(extname(f)));
  } catch (error) {
    if ((error as NodeJS.ErrnoException).code === 'ENOENT') return profiles;
    throw error;
  }
  for (const file of files.sort()) {
    const profile = readProfileFile(join(dir, file));
    profiles.set(profile.name, profile);
  }
  return profiles;
}

/** Reads the profile's token from its environment variable or file. */
export function readToken(
  auth: Exclude<AuthSettings, { type: 'munge' }>,
  env: NodeJS.ProcessEnv = process.env,
): Secret {
  if (auth.tokenEnv) {
    const value = env[auth.tokenEnv]?.trim();
    if (!value) throw new ConfigError(`the token variable ${auth.tokenEnv} is not set (or empty)`);
    return new Secret(value);
  }
  const file = auth.tokenFile as string;
  let stats: Stats;
  try {
    stats = statSync(file);
  } catch (error) {
    throw new ConfigError(`cannot read token file ${file}: ${(error as Error).message}`);
  }
  refuseSharedAccess(file, stats, 'token file');
  const value = readFileSync(file, 'utf8').trim();
  if (!value) throw new ConfigError(`token file ${file} is empty`);
  return new Secret(value);
}
