import { type Command, InvalidArgumentError } from 'commander';
import { OWNER_NAME } from '../access/principal.js';
import { listAudit } from '../db/audit.js';
import { auditRowView } from '../views/audit-view.js';
import { openCliHistory } from './cli-history.js';
import { withDaemonDataDir } from './data-dir.js';
import { table } from './format.js';
import { parseInteger, parseSince } from './options.js';
import { print } from './terminal.js';

interface AuditFlags {
  dataDir: string;
  since?: number;
  owner?: string;
  action?: string;
  json?: boolean;
  limit?: number;
}

/** Rows printed when `--limit` is not given. */
const DEFAULT_LIMIT = 100;
/** At most, as the API's page: a longer look back is paged with `--since`. */
const MAX_LIMIT = 10_000;

const time = (ms: number) => new Date(ms).toISOString().replace('T', ' ').slice(0, 19);

/**
 * `schedflow audit`: the audit log (docs/audit.md), newest first, read from the daemon's history
 * directly as the other read commands are: whoever can read the data dir can read the history.
 */
export function registerAuditCommand(program: Command): void {
  withDaemonDataDir(
    program
      .command('audit')
      .description('the audit log: who did what (cancel, resubmit, trigger, pause, tokens, logins…), newest first')
      .option('--since <time>', 'rows at or after: 1h, 3d, 2026-11-01T08:00Z, Unix seconds', (v) => parseSince(v))
      .option('--owner <owner>', "rows about this owner's requests, runs, pipelines and tokens", (v) => {
        if (!OWNER_NAME.test(v)) throw new InvalidArgumentError(`"${v}" is not an owner name`);
        return v;
      })
      .option('--action <action>', 'rows of this action, e.g. request.cancel (docs/audit.md lists them)')
      .option('--limit <n>', `how many rows (default ${DEFAULT_LIMIT}, at most ${MAX_LIMIT})`, (v) => {
        const n = parseInteger(v);
        if (n < 1 || n > MAX_LIMIT) throw new InvalidArgumentError(`--limit: 1 to ${MAX_LIMIT}`);
        return n;
      })
      .option('--json', 'print JSON (one array, as GET /api/v1/audit gives its items)'),
  ).action(async (_opts: unknown, cmd: Command) => {
    const flags = cmd.optsWithGlobals() as AuditFlags;
    const history = await openCliHistory(flags.dataDir, { write: false });
    try {
      const rows = await listAudit(history.store, {
        since: flags.since === undefined ? undefined : flags.since * 1000,
        owner: flags.owner,
        action: flags.action,
        limit: flags.limit ?? DEFAULT_LIMIT,
      });
      if (flags.json) {
        print(`${JSON.stringify(rows.map(auditRowView), null, 2)}\n`);
        return;
      }
      if (rows.length === 0) {
        print('no audit rows match\n');
        return;
      }
      print(
        `${table(
          ['AT (UTC)', 'ACTOR', 'OWNER', 'ACTION', 'TARGET', 'OUTCOME', 'HTTP REQUEST', 'DETAIL'],
          rows.map((r) => [
            time(r.at),
            r.actor,
            r.owner ?? '-',
            r.action,
            r.target ?? '-',
            r.outcome,
            r.httpRequestId ?? '-',
            r.detail ?? '',
          ]),
        )}\n`,
      );
    } finally {
      await history.close();
    }
  });
}
