import { createHash } from 'node:crypto';
import { resolve } from 'node:path';
import type Database from 'better-sqlite3';
import { is, type SQL, Table } from 'drizzle-orm';
import type { BetterSQLite3Database } from 'drizzle-orm/better-sqlite3';
import { drizzle as pgDrizzle } from 'drizzle-orm/node-postgres';
import type pg from 'pg';
import * as pgSchema from './pg-schema.js';
import * as schema from './schema.js';

/**
 * The history as the daemon's code reads and writes it, on SQLite (the embedded default) or
 * PostgreSQL (for several hosts): every statement and transaction returns a promise, and one query,
 * written once with drizzle's builders, runs on either.
 *
 * Queries are built on `db` with the tables of `t`, and run by `all`, `one` and `run`, never by
 * the builder's own methods: `db` and `t` are typed as SQLite's, and on PostgreSQL are
 * PostgreSQL's (src/db/pg-schema.ts is generated from src/db/schema.ts with the same row types
 * and the same names, which test/unit/pg-schema.test.ts checks), whose builders have no `.all()`.
 */
export interface History {
  readonly dialect: 'sqlite' | 'postgres';
  readonly db: Db;
  readonly t: typeof tables;
  all<T>(query: Rows<T>): Promise<T[]>;
  /** The first row (give the query a `.limit(1)` when it may have more). */
  one<T>(query: Rows<T>): Promise<T | undefined>;
  /**
   * The select, locking the rows it reads until the transaction ends: on PostgreSQL (`FOR
   * UPDATE`), where other hosts write at the same time; SQLite's transactions have the
   * database to themselves already.
   */
  forUpdate<Q extends Rows<unknown>>(query: Q): Q;
  /** Runs an insert, update or delete; the number of rows it changed. */
  run(query: Runnable): Promise<number>;
  /**
   * Rows of a select with placeholders (`sql.placeholder(name)`), prepared once per `key` and
   * kept: building and preparing a query again on every call was most of what a hot one cost
   * (issue 14). `build` makes the same query for a key every time.
   */
  prepared<T>(key: string, build: () => Preparable<T>, values: Record<string, unknown>): Promise<T[]>;
  /** An insert, update or delete with placeholders, prepared once per `key` as `prepared` is; the rows it changed. */
  preparedRun(key: string, build: () => PreparableWrite, values: Record<string, unknown>): Promise<number>;
  /** Rows of a raw statement (`sql\`…\``), for what the builders cannot say. */
  rows<T>(statement: SQL): Promise<T[]>;
  /**
   * `work` in a transaction (a savepoint when called on a transaction's handle): committed when
   * it resolves, undone when it throws. `work` uses `tx`, never the handle it was called on, and
   * runs the savepoints of one transaction one after another (undoing one undoes those begun
   * after it, on either database).
   */
  transaction<T>(work: (tx: History) => Promise<T>): Promise<T>;
}

/** A drizzle database on SQLite, as openDatabase (src/db/database.ts) opens it. */
export type Db = BetterSQLite3Database<typeof schema>;

/** The better-sqlite3 connection under drizzle (its `$client`, which the `Db` type leaves out). */
export function connectionOf(db: Db): Database.Database {
  return (db as unknown as { $client: Database.Database }).$client;
}

/** The tables, by their names in src/db/schema.ts. */
const tables = Object.fromEntries(Object.entries(schema).filter(([, value]) => is(value, Table))) as {
  [K in keyof typeof schema as (typeof schema)[K] extends Table ? K : never]: (typeof schema)[K];
};
const pgTables = Object.fromEntries(
  Object.keys(tables).map((key) => [key, (pgSchema as Record<string, unknown>)[key]]),
) as unknown as typeof tables;

interface Rows<T> {
  all(): T[] | Promise<T[]>;
}
interface Runnable {
  run(): unknown;
}
/** A select drizzle can prepare (SQLite's `prepare()`; PostgreSQL's takes a name). */
interface Preparable<T> {
  prepare(): { all(values?: Record<string, unknown>): T[] | Promise<T[]> };
}

interface PreparableWrite {
  prepare(): { run(values?: Record<string, unknown>): unknown };
}

/**
 * Kinds of statement a history keeps prepared at most; past it they are prepared for the one
 * call (on PostgreSQL still under their name, which each connection then keeps).
 */
const MAX_PREPARED = 256;

function cached<S>(cache: Map<string, S>, key: string, make: () => S): S {
  const hit = cache.get(key);
  if (hit !== undefined) return hit;
  const made = make();
  if (cache.size < MAX_PREPARED) cache.set(key, made);
  return made;
}

/** The history in a SQLite database opened by openDatabase: one per connection (its gate is the connection's). */
export function sqliteHistory(db: Db): History {
  const sqlite = connectionOf(db);
  let history = sqliteHistories.get(sqlite);
  if (!history) {
    history = new SqliteHistory(db, sqlite, gateOf(sqlite), 0, null);
    sqliteHistories.set(sqlite, history);
  }
  return history;
}
const sqliteHistories = new WeakMap<Database.Database, History>();

const gates = new WeakMap<Database.Database, SqliteGate>();
function gateOf(sqlite: Database.Database): SqliteGate {
  let gate = gates.get(sqlite);
  if (!gate) {
    gate = new SqliteGate(turnOf(sqlite));
    gates.set(sqlite, gate);
  }
  return gate;
}

/**
 * Whose turn it is to write a file, for every connection of this process to it: one waiting
 * for another's write lock (busy_timeout) blocks the thread, so the transaction holding the
 * lock, here between two of its statements, could never end (a deadlock, and an error after
 * 5 s). A daemon has one connection; tests run two daemons in one process.
 */
const turns = new Map<string, { open: Promise<void> | null }>();
function turnOf(sqlite: Database.Database): { open: Promise<void> | null } {
  if (sqlite.memory) return { open: null };
  const file = resolve(sqlite.name);
  let turn = turns.get(file);
  if (!turn) {
    turn = { open: null };
    turns.set(file, turn);
  }
  return turn;
}

/**
 * One SQLite connection serves every caller, so a transaction's statements must be alone on it
 * while the transaction is open: a statement of another caller would be in it (and undone with
 * it). Outside a transaction's handle, statements wait for the open one to end (on any of the
 * process's connections to the file, see turnOf).
 * A transaction waits on nothing but the history (its statements run at once), so it ends
 * within the turn of the event loop it began in; one still open at the next turn has awaited
 * something else (another host, a timer, the root handle from inside it), which would hold
 * every other caller: it is undone then and there, the gate is opened, and what it does next
 * fails.
 */
class SqliteGate {
  constructor(private readonly turn: { open: Promise<void> | null }) {}
  get open(): Promise<void> | null {
    return this.turn.open;
  }
  set open(value: Promise<void> | null) {
    this.turn.open = value;
  }
  readonly statements = new Map<string, ReturnType<Preparable<unknown>['prepare']>>();
  readonly writes = new Map<string, ReturnType<PreparableWrite['prepare']>>();
  /**
   * Savepoint names not in use. Two savepoints of one transaction may be open at once, so each
   * has a name no open one has; names are given again once released, so their statements are
   * prepared once (a new name a savepoint was a tenth of a mass end's CPU).
   */
  readonly freeSavepoints: string[] = [];
  savepoints = 0;
  readonly #control = new Map<string, Database.Statement>();
  /** BEGIN, COMMIT, SAVEPOINT …: prepared once on the connection. */
  control(sqlite: Database.Database, text: string): void {
    let statement = this.#control.get(text);
    if (!statement) {
      statement = sqlite.prepare(text);
      this.#control.set(text, statement);
    }
    statement.run();
  }
}

const UNDONE = 'this SQLite transaction was undone: it awaited something other than the history';

class SqliteHistory implements History {
  readonly dialect = 'sqlite';
  readonly t = tables;
  constructor(
    readonly db: Db,
    private readonly sqlite: Database.Database,
    private readonly gate: SqliteGate,
    /** 0 for the database's handle, the savepoint depth for a transaction's. */
    private readonly depth: number,
    /** The transaction this handle is of (null for the database's handle). */
    private readonly tx: { undone: boolean } | null,
  ) {}

  forUpdate<Q>(query: Q): Q {
    return query;
  }
  // Each statement: the wait for an open transaction (the database's handle) and the statement
  // in one continuation, so nothing can begin between them; none in a transaction undone.
  async prepared<T>(key: string, build: () => Preparable<T>, values: Record<string, unknown>): Promise<T[]> {
    // Bound to the connection, which a transaction's handle shares: one cache serves both.
    const statement = cached(this.gate.statements, key, () => build().prepare());
    if (this.depth === 0) while (this.gate.open) await this.gate.open;
    this.live();
    return statement.all(values) as T[];
  }
  async preparedRun(key: string, build: () => PreparableWrite, values: Record<string, unknown>): Promise<number> {
    const statement = cached(this.gate.writes, key, () => build().prepare());
    if (this.depth === 0) while (this.gate.open) await this.gate.open;
    this.live();
    return (statement.run(values) as Database.RunResult).changes;
  }
  async all<T>(query: Rows<T>): Promise<T[]> {
    if (this.depth === 0) while (this.gate.open) await this.gate.open;
    this.live();
    return query.all() as T[];
  }
  async one<T>(query: Rows<T>): Promise<T | undefined> {
    return (await this.all(query))[0];
  }
  async run(query: Runnable): Promise<number> {
    if (this.depth === 0) while (this.gate.open) await this.gate.open;
    this.live();
    return (query.run() as Database.RunResult).changes;
  }
  async rows<T>(statement: SQL): Promise<T[]> {
    if (this.depth === 0) while (this.gate.open) await this.gate.open;
    this.live();
    return this.db.all<T>(statement);
  }
  private live(): void {
    if (this.tx?.undone) throw new Error(UNDONE);
  }
  async transaction<T>(work: (tx: History) => Promise<T>): Promise<T> {
    if (this.depth > 0) return this.savepoint(work);
    // Waited for and taken in one continuation, as for a statement.
    while (this.gate.open) await this.gate.open;
    let end!: () => void;
    this.gate.open = new Promise((resolve) => {
      end = resolve;
    });
    const tx = { undone: false };
    let released = false;
    const release = () => {
      if (released) return;
      released = true;
      this.gate.open = null;
      end();
    };
    // Still open at the next turn: undone now, so that nothing else waits on it any longer.
    const watch = setImmediate(() => {
      tx.undone = true;
      if (this.sqlite.inTransaction) this.gate.control(this.sqlite, 'ROLLBACK');
      release();
    });
    try {
      // IMMEDIATE: the write lock as it begins, where busy_timeout applies (see database.ts).
      this.gate.control(this.sqlite, 'BEGIN IMMEDIATE');
      try {
        const value = await work(new SqliteHistory(this.db, this.sqlite, this.gate, 1, tx));
        if (tx.undone) throw new Error(UNDONE);
        this.gate.control(this.sqlite, 'COMMIT');
        return value;
      } catch (error) {
        if (!tx.undone && this.sqlite.inTransaction) this.gate.control(this.sqlite, 'ROLLBACK');
        throw error;
      }
    } finally {
      clearImmediate(watch);
      release();
    }
  }
  private async savepoint<T>(work: (tx: History) => Promise<T>): Promise<T> {
    this.live();
    // A name no open savepoint has (see freeSavepoints).
    const name = this.gate.freeSavepoints.pop() ?? `sp${++this.gate.savepoints}`;
    try {
      this.gate.control(this.sqlite, `SAVEPOINT ${name}`);
      try {
        const value = await work(new SqliteHistory(this.db, this.sqlite, this.gate, this.depth + 1, this.tx));
        this.live();
        this.gate.control(this.sqlite, `RELEASE ${name}`);
        return value;
      } catch (error) {
        if (!this.tx?.undone && this.sqlite.inTransaction) {
          this.gate.control(this.sqlite, `ROLLBACK TO ${name}`);
          this.gate.control(this.sqlite, `RELEASE ${name}`);
        }
        throw error;
      }
    } finally {
      this.gate.freeSavepoints.push(name);
    }
  }
}

type PgDb = ReturnType<typeof pgDrizzle>;

/** The history in the PostgreSQL database `pool` reaches (migrated: see src/db/pg-migrate.ts). */
export function postgresHistory(pool: pg.Pool): History {
  return new PostgresHistory(pgDrizzle(pool), new Map());
}

type PgPrepared = { execute(values?: Record<string, unknown>): Promise<unknown> };

class PostgresHistory implements History {
  readonly dialect = 'postgres';
  readonly t = pgTables;
  readonly db: Db;
  constructor(
    private readonly pgDb: PgDb,
    /** The pool's prepared queries; null in a transaction, whose queries run on its own connection. */
    private readonly statements: Map<string, PgPrepared> | null,
  ) {
    // The one place PostgreSQL's builders are given SQLite's type (see History).
    this.db = pgDb as unknown as Db;
  }
  forUpdate<Q>(query: Q): Q {
    return (query as unknown as { for(strength: 'update'): Q }).for('update');
  }
  async all<T>(query: Rows<T>): Promise<T[]> {
    return (await (query as unknown as PromiseLike<T[]>)) ?? [];
  }
  async one<T>(query: Rows<T>): Promise<T | undefined> {
    return (await this.all(query))[0];
  }
  async run(query: Runnable): Promise<number> {
    const result = (await (query as unknown as PromiseLike<{ rowCount: number | null }>)) ?? { rowCount: 0 };
    return result.rowCount ?? 0;
  }
  /** The statement of `key`: the key names it on each connection of the pool (pg prepares it there once). */
  private statement(key: string, build: () => Preparable<unknown> | PreparableWrite): PgPrepared {
    // PostgreSQL keeps the first 63 bytes of a name: keys longer than that (an UPDATE's column
    // list) would share one, and the second statement prepared under it fail.
    const name = `sf_${createHash('sha1').update(key).digest('hex').slice(0, 40)}`;
    const prepare = () => (build() as unknown as { prepare(name: string): PgPrepared }).prepare(name);
    return this.statements ? cached(this.statements, key, prepare) : prepare();
  }
  async prepared<T>(key: string, build: () => Preparable<T>, values: Record<string, unknown>): Promise<T[]> {
    const statement = this.statement(key, build);
    return (await statement.execute(values)) as T[];
  }
  async preparedRun(key: string, build: () => PreparableWrite, values: Record<string, unknown>): Promise<number> {
    const statement = this.statement(key, build);
    const result = (await statement.execute(values)) as { rowCount?: number | null } | undefined;
    return result?.rowCount ?? 0;
  }
  async rows<T>(statement: SQL): Promise<T[]> {
    return (await this.pgDb.execute(statement)).rows as T[];
  }
  transaction<T>(work: (tx: History) => Promise<T>): Promise<T> {
    return this.pgDb.transaction((tx) => work(new PostgresHistory(tx as unknown as PgDb, null)));
  }
}
