import type { Command } from 'commander';
import { API_SCOPES, type ApiScope } from '../db/schema.js';
import { createToken, listTokens, revokeToken } from '../db/tokens.js';
import { ConfigError } from '../errors.js';
import { openCliHistory } from './cli-history.js';
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
    .requiredOption('--scopes <scopes>', `comma-separated: ${API_SCOPES.join(', ')} (admin holds them all)`)
    .action(async (opts: { name: string; scopes: string }, cmd: Command) => {
      if (!NAME.test(opts.name)) {
        throw new ConfigError(`--name "${opts.name}": letters, digits, ".", "_" and "-", up to 64 characters`);
      }
      const scopes = parseScopes(opts.scopes);
      const history = await openCliHistory(flagsOf(cmd).dataDir, { write: true });
      try {
        const { token, info } = await createToken(history.store, { name: opts.name, scopes });
        print(`${token}\n`);
        printError(
          `schedflow: token "${info.name}" (${info.scopes.join(', ')}) created; it is not shown again: keep it now\n`,
        );
      } finally {
        await history.close();
      }
    });

  tokens
    .command('list')
    .description('the tokens (names, scopes, times; never the tokens themselves)')
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
                  scopes: r.scopes,
                  created_at: new Date(r.createdAt).toISOString(),
                  last_used_at: r.lastUsedAt === null ? null : new Date(r.lastUsedAt).toISOString(),
                  revoked_at: r.revokedAt === null ? null : new Date(r.revokedAt).toISOString(),
                })),
                null,
                2,
              )}\n`
            : `${table(
                ['NAME', 'SCOPES', 'CREATED', 'LAST USED', 'REVOKED'],
                rows.map((r) => [r.name, r.scopes.join(','), time(r.createdAt), time(r.lastUsedAt), time(r.revokedAt)]),
              )}\n`,
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
        if (!(await revokeToken(history.store, name)))
          throw new ConfigError(`no live token named "${name}" (see: schedflow tokens list)`);
        printError(`schedflow: token "${name}" revoked\n`);
      } finally {
        await history.close();
      }
    });
}
