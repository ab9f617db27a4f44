import { join, resolve } from 'node:path';
import type { Command } from 'commander';
import { cliActor, OWNER_NAME } from '../access/principal.js';
import { API_SCOPES, type ApiScope } from '../db/schema.js';
import { createToken, listTokens, revokeToken, type TokenChange, updateToken } from '../db/tokens.js';
import { ConfigError } from '../errors.js';
import { loadProfiles } from '../sched/profile.js';
import { openCliHistory } from './cli-history.js';
import { cliUser } from './daemon-api.js';
import { withDaemonDataDir } from './data-dir.js';
import { table } from './format.js';
import { print, printError } from './terminal.js';

interface TokensFlags {
  dataDir: string;
  json?: boolean;
}

function parseScopes(text: string): ApiScope[] {
  const scopes = text
    .split(',')
    .map((s) => s.trim().toLowerCase())
    .filter(Boolean);
  const unknown = scopes.filter((s) => !(API_SCOPES as readonly string[]).includes(s));
  if (scopes.length === 0 || unknown.length > 0) {
    throw new ConfigError(
      `--scopes ${unknown.length ? `"${unknown.join(', ')}" unknown` : 'empty'}: give a comma-separated list of ${API_SCOPES.join(', ')}`,
    );
  }
  return scopes as ApiScope[];
}

const NAME = /^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$/;
const time = (ms: number | null) => (ms === null ? '-' : new Date(ms).toISOString().replace('T', ' ').slice(0, 19));

function parseOwner(text: string): string {
  if (!OWNER_NAME.test(text)) {
    throw new ConfigError(`--owner "${text}": letters, digits, ".", "_" and "-", up to 64 characters`);
  }
  return text;
}

/**
 * `--profiles a,b`: profile names, checked against the profiles of `configDir` when it has any
 * (the daemon's, when the CLI runs beside it with the same --config); a name none of them has
 * is a typo that would refuse every request of the token.
 */
function parseProfiles(text: string, configDir: string): string[] {
  const names = [
    ...new Set(
      text
        .split(',')
        .map((s) => s.trim())
        .filter(Boolean),
    ),
  ];
  if (names.length === 0) throw new ConfigError('--profiles empty: give a comma-separated list of profile names');
  const dir = join(resolve(configDir), 'profiles');
  const known = loadProfiles(dir);
  if (known.size === 0) {
    printError(`schedflow: note: no profiles in ${dir}: the names given to --profiles are not checked\n`);
    return names;
  }
  const unknown = names.filter((name) => !known.has(name));
  if (unknown.length > 0) {
    throw new ConfigError(
      `--profiles: no profile ${unknown.map((n) => `"${n}"`).join(', ')} in ${dir} (have: ${[...known.keys()].join(', ')})`,
    );
  }
  return names;
}

/** `--max-in-flight N` and `--max-per-day N`: a whole number, 0 or more; `none` (update only) lifts the limit. */
function parseLimit(flag: string, text: string, mayLift: boolean): number | null {
  if (mayLift && text.trim().toLowerCase() === 'none') return null;
  if (!/^\d{1,9}$/.test(text.trim())) {
    throw new ConfigError(`${flag} "${text}": a whole number, 0 or more${mayLift ? ', or none (no limit)' : ''}`);
  }
  return Number(text.trim());
}

const limitText = (n: number | null) => (n === null ? '-' : String(n));
const profilesText = (p: readonly string[] | null) => (p === null ? '*' : p.join(','));

/** Who runs the command, as the audit log names it. */
const auditor = () => ({ actor: cliActor(cliUser()) });

/** The configuration folder, as `schedflow start` finds it. */
const configDirOf = (flag: string | undefined): string => flag ?? process.env.SCHEDFLOW_CONFIG_DIR ?? './config';

interface TokenLimitFlags {
  owner?: string;
  scopes?: string;
  profiles?: string;
  anyProfile?: boolean;
  maxInFlight?: string;
  maxPerDay?: string;
  config?: string;
}

export function registerTokensCommand(program: Command): void {
  const tokens = withDaemonDataDir(
    program
      .command('tokens')
      .description('tokens of the local HTTP API: create (shown once), list, revoke')
      .option('--json', 'print JSON'),
    // Tokens may be made before a first start, in the data dir named for it (src/cli/data-dir.ts).
    { mayMake: true },
  );
  const flagsOf = (cmd: Command) => cmd.optsWithGlobals() as TokensFlags;

  tokens
    .command('create')
    .description('make a token and print it, alone, on stdout: it is shown this once (only its hash is kept)')
    .requiredOption('--name <name>', 'who or what uses it, e.g. lims (letters, digits, . _ -)')
    .requiredOption(
      '--scopes <scopes>',
      `comma-separated: ${API_SCOPES.join(', ')} (admin holds them all; audit reads everything and changes nothing)`,
    )
    .option('--owner <owner>', "whose requests it makes and sees (default: the token's name)")
    .option('--profiles <names>', 'comma-separated scheduler profiles its requests may use (default: any)')
    .option('--max-in-flight <n>', 'at most this many of its requests not yet ended (default: no limit)')
    .option('--max-per-day <n>', 'at most this many of its requests accepted in any 24 hours (default: no limit)')
    .option(
      '--config <dir>',
      'configuration folder whose profiles/ --profiles names are checked against (default ./config, or SCHEDFLOW_CONFIG_DIR)',
    )
    .action(async (opts: { name: string; scopes: string } & TokenLimitFlags, cmd: Command) => {
      if (!NAME.test(opts.name)) {
        throw new ConfigError(`--name "${opts.name}": letters, digits, ".", "_" and "-", up to 64 characters`);
      }
      const scopes = parseScopes(opts.scopes);
      const owner = opts.owner === undefined ? undefined : parseOwner(opts.owner);
      const profiles = opts.profiles === undefined ? null : parseProfiles(opts.profiles, configDirOf(opts.config));
      const maxInFlight =
        opts.maxInFlight === undefined ? null : parseLimit('--max-in-flight', opts.maxInFlight, false);
      const maxPerDay = opts.maxPerDay === undefined ? null : parseLimit('--max-per-day', opts.maxPerDay, false);
      const history = await openCliHistory(flagsOf(cmd).dataDir, { write: true });
      try {
        const { token, info } = await createToken(history.store, {
          name: opts.name,
          scopes,
          owner,
          profiles,
          maxInFlight,
          maxPerDay,
          audit: auditor(),
        });
        print(`${token}\n`);
        printError(
          `schedflow: token "${info.name}" (${info.scopes.join(', ')}) created, owner "${info.owner}"; it is not shown again: keep it now\n`,
        );
      } finally {
        await history.close();
      }
    });

  tokens
    .command('list')
    .description('the tokens (names, owners, scopes, bindings, quotas, times; never the tokens themselves)')
    .action(async (_opts: unknown, cmd: Command) => {
      const flags = flagsOf(cmd);
      const history = await openCliHistory(flags.dataDir, { write: true });
      try {
        const rows = await listTokens(history.store);
        print(
          flags.json
            ? `${JSON.stringify(
                rows.map((r) => ({
                  name: r.name,
                  owner: r.owner,
                  scopes: r.scopes,
                  profiles: r.profiles,
                  max_in_flight: r.maxInFlight,
                  max_per_day: r.maxPerDay,
                  created_at: new Date(r.createdAt).toISOString(),
                  last_used_at: r.lastUsedAt === null ? null : new Date(r.lastUsedAt).toISOString(),
                  revoked_at: r.revokedAt === null ? null : new Date(r.revokedAt).toISOString(),
                })),
                null,
                2,
              )}\n`
            : `${table(
                ['NAME', 'OWNER', 'SCOPES', 'PROFILES', 'IN FLIGHT', 'PER DAY', 'CREATED', 'LAST USED', 'REVOKED'],
                rows.map((r) => [
                  r.name,
                  r.owner,
                  r.scopes.join(','),
                  profilesText(r.profiles),
                  limitText(r.maxInFlight),
                  limitText(r.maxPerDay),
                  time(r.createdAt),
                  time(r.lastUsedAt),
                  time(r.revokedAt),
                ]),
              )}\n`,
        );
      } finally {
        await history.close();
      }
    });

  tokens
    .command('update')
    .description(
      "change a live token's owner, scopes, bindings or quotas; the token stays the same, its next request uses them",
    )
    .argument('<name>', 'the name given at create')
    .option('--owner <owner>', 'whose requests it makes and sees from now on')
    .option('--scopes <scopes>', `comma-separated: ${API_SCOPES.join(', ')} (replaces its scopes)`)
    .option('--profiles <names>', 'comma-separated scheduler profiles its requests may use (replaces the list)')
    .option('--any-profile', 'lift the binding: any profile')
    .option('--max-in-flight <n>', 'at most this many of its requests not yet ended; none: no limit')
    .option('--max-per-day <n>', 'at most this many of its requests accepted in any 24 hours; none: no limit')
    .option(
      '--config <dir>',
      'configuration folder whose profiles/ --profiles names are checked against (default ./config, or SCHEDFLOW_CONFIG_DIR)',
    )
    .action(async (name: string, opts: TokenLimitFlags, cmd: Command) => {
      if (opts.profiles !== undefined && opts.anyProfile) {
        throw new ConfigError('--profiles and --any-profile: give one of them');
      }
      const change: TokenChange = {
        ...(opts.owner !== undefined && { owner: parseOwner(opts.owner) }),
        ...(opts.scopes !== undefined && { scopes: parseScopes(opts.scopes) }),
        ...(opts.profiles !== undefined && { profiles: parseProfiles(opts.profiles, configDirOf(opts.config)) }),
        ...(opts.anyProfile && { profiles: null }),
        ...(opts.maxInFlight !== undefined && { maxInFlight: parseLimit('--max-in-flight', opts.maxInFlight, true) }),
        ...(opts.maxPerDay !== undefined && { maxPerDay: parseLimit('--max-per-day', opts.maxPerDay, true) }),
      };
      if (Object.keys(change).length === 0) {
        throw new ConfigError(
          'nothing to change: give --owner, --scopes, --profiles, --any-profile, --max-in-flight or --max-per-day',
        );
      }
      const history = await openCliHistory(flagsOf(cmd).dataDir, { write: true });
      try {
        const info = await updateToken(history.store, name, change, { audit: auditor() });
        if (!info) throw new ConfigError(`no live token named "${name}" (see: schedflow tokens list)`);
        printError(
          `schedflow: token "${info.name}" updated: owner ${info.owner}, scopes ${info.scopes.join(',')}, profiles ${profilesText(info.profiles)}, max in flight ${limitText(info.maxInFlight)}, max per day ${limitText(info.maxPerDay)}\n`,
        );
      } finally {
        await history.close();
      }
    });

  tokens
    .command('revoke')
    .description('revoke a token: requests with it are refused (401) from now on')
    .argument('<name>', 'the name given at create')
    .action(async (name: string, _opts: unknown, cmd: Command) => {
      const history = await openCliHistory(flagsOf(cmd).dataDir, { write: true });
      try {
        if (!(await revokeToken(history.store, name, Date.now(), auditor())))
          throw new ConfigError(`no live token named "${name}" (see: schedflow tokens list)`);
        printError(`schedflow: token "${name}" revoked\n`);
      } finally {
        await history.close();
      }
    });
}
