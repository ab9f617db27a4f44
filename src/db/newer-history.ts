import { readFileSync } from 'node:fs';
import { join } from 'node:path';
import { HistoryNewerError } from '../errors.js';

/** One row of drizzle's bookkeeping table: a migration's hash and its journal time (`folderMillis`). */
export interface AppliedMigration {
  hash: string;
  createdAt: number;
}

/**
 * Refuses a history that a newer release migrated: one with a migration applied that is not in
 * this release's journal. Drizzle's migrator (and ours, after it) only applies migrations newer
 * than the last applied, so without this check an older release starts on a newer schema and
 * writes rows the newer code may not read (a column it does not fill, a state it does not know).
 * Migrations are known by their journal time, as drizzle compares them: a migration's hash
 * changes when its file is edited after it landed (0000 of PostgreSQL was), its time does not.
 */
export function refuseNewerHistory(
  applied: readonly AppliedMigration[],
  known: readonly { folderMillis: number }[],
  migrationsFolder: string,
  where: string,
): void {
  const knownAt = new Set(known.map((migration) => migration.folderMillis));
  const unknown = applied.filter((migration) => !knownAt.has(migration.createdAt));
  if (unknown.length === 0) return;
  const names = unknown
    .map((migration) => `made ${new Date(migration.createdAt).toISOString()}, hash ${migration.hash.slice(0, 12)}`)
    .join('; ');
  throw new HistoryNewerError(
    `the history at ${where} was migrated by a newer schedflow: it has ${unknown.length} migration(s) this release does not know (${names}); this release's last is ${lastKnownTag(migrationsFolder)}. Run the newer release on it, or restore the backup taken before the upgrade to go back to this one (docs/operations.md, "Rolling back")`,
  );
}

/** The name of this release's last migration (`0024_job_control`), from drizzle-kit's journal. */
function lastKnownTag(migrationsFolder: string): string {
  try {
    const journal = JSON.parse(readFileSync(join(migrationsFolder, 'meta', '_journal.json'), 'utf8')) as {
      entries?: { tag?: unknown }[];
    };
    const tag = journal.entries?.at(-1)?.tag;
    return typeof tag === 'string' ? tag : 'unknown';
  } catch {
    return 'unknown';
  }
}
