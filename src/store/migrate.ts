import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { setTimeout as sleep } from 'node:timers/promises';
import type pg from 'pg';
import { DatabaseConnectionError } from '../lib/database-connection-error.ts';
import {
  pgErrorCode,
  PG_DEADLOCK,
  PG_INSUFFICIENT_PRIVILEGE,
  PG_LOCK_NOT_AVAILABLE,
} from './pg-error-codes.ts';
import { Logger as QueueLogger, runMigrations as runQueueMigrations } from 'graphile-worker';

/**
 * The job queue's schema, named wherever graphile-worker is started: left out, it is graphile-worker's own setting
 * (GRAPHILE_WORKER_SCHEMA, or a `.graphile-workerrc` found up the directory tree), and svc's SQL, written for this
 * one, added jobs that a runner polling another schema never ran (review). Every setting of svc is its own.
 */
export const JOB_QUEUE_SCHEMA = 'graphile_worker';

/**
 * Numbered, forward-only SQL migrations (src/store/migrations/NNNN_name.sql), then the job queue's own.
 * A session-level advisory lock serialises concurrent starts: the second instance waits, then finds
 * everything applied. A shipped migration is never edited; add the next number instead: each applied file's
 * checksum is recorded, and a start on a database where one was applied with other contents is refused.
 *
 * A file is run in one transaction with its record, unless its first line is `-- svc:no-transaction`: then
 * its statements are run one at a time, outside any transaction, so that it can build an index
 * CONCURRENTLY (a plain build blocks every write to the table for as long as it takes: seconds per million
 * rows). Such a file holds only plain statements (a DO block is one: what must change together goes in one), each
 * ending with `;` at the end of a line, each safe to run again (a file stopped halfway is run again whole:
 * `drop index concurrently if exists` first).
 *
 * A transactional file waits at most `lockTimeoutMs` for each table lock it takes (PostgreSQL's lock_timeout,
 * set for its transaction only). Without the bound, an ALTER TABLE behind one long-open transaction waits for
 * as long as that lasts, and every query on the table queues behind the ALTER: the service stops while the
 * migration waits. A try that times out is undone and run again after a pause, up to `lockAttempts` tries;
 * then the start fails naming the transactions that were open longer than the wait. So is a try PostgreSQL ends
 * to break a deadlock.
 */
const MIGRATION_LOCK_ID = 7_351_846_001;
const MIGRATIONS_DIR = new URL('./migrations/', import.meta.url);
const NO_TRANSACTION = /^-- svc:no-transaction\s*$/m;
const CONCURRENT = /^(create|drop) (unique )?index concurrently /i;
/**
 * How often a start that waits for another's migrations tries the lock. Polled rather than waited for in one
 * statement: a waiting statement holds a snapshot, and the holder's CREATE INDEX CONCURRENTLY waits for
 * every snapshot older than its own, so the two would wait for each other.
 */
const LOCK_POLL_MS = 200;
/** graphile-worker logs through our logger elsewhere; its migrations have nothing worth saying. */
const silentQueueLogger = new QueueLogger(() => () => {});

export interface MigrationFile {
  version: string;
  name: string;
  sql: string;
  /** sha256 of the contents with line endings as \n (a checkout with CRLF is the same file). */
  checksum: string;
}

export interface MigrationLog {
  info(message: string): void;
  warn(message: string): void;
}

export interface MigrateOptions {
  /** How long a statement of a transactional migration waits for a lock before its try is undone. */
  lockTimeoutMs?: number;
  /** Tries of one migration that time out waiting for a lock before the start fails. */
  lockAttempts?: number;
  /** The files to apply: by default, every file in src/store/migrations (tests give their own). */
  files?: MigrationFile[];
}

/** The default of SVC_MIGRATION_LOCK_TIMEOUT_MS (config.ts). */
const DEFAULT_MIGRATION_LOCK_TIMEOUT_MS = 3_000;
const DEFAULT_LOCK_ATTEMPTS = 20;

export async function listMigrations(): Promise<MigrationFile[]> {
  const names = (await readdir(MIGRATIONS_DIR)).filter((n) => /^\d{4}_[a-z0-9_]+\.sql$/.test(n)).sort();
  return Promise.all(
    names.map(async (name) => {
      const sql = await readFile(new URL(name, MIGRATIONS_DIR), 'utf8');
      return { version: name.slice(0, 4), name, sql, checksum: checksumOf(sql) };
    }),
  );
}

export function checksumOf(sql: string): string {
  return createHash('sha256').update(sql.replace(/\r\n/g, '\n')).digest('hex');
}

/**
 * The statements of a no-transaction file: split where a line ends with `;` outside a dollar-quoted body (a DO
 * block's, whose own statements end lines too), comment lines outside one dropped. Not a SQL parser: a `;` at
 * the end of a line inside a quoted string or a block comment would end its statement, and a `$$` in a string,
 * an identifier or after code on a line would be taken for a quote; none of ours has either.
 */
export function plainStatements(sql: string): string[] {
  const statements: string[] = [];
  let lines: string[] = [];
  let openQuote: string | null = null;
  for (const line of sql.split(/\r?\n/)) {
    // Inside a body a line is text, `--` or not: its `$$` ends the body, as PostgreSQL reads it (review).
    if (openQuote === null && /^\s*--/.test(line)) continue;
    for (const [tag] of line.matchAll(/\$(?:[A-Za-z_]\w*)?\$/g)) {
      if (openQuote === null) openQuote = tag;
      else if (tag === openQuote) openQuote = null;
    }
    const end = openQuote === null && /;[ \t]*$/.test(line);
    lines.push(end ? line.replace(/;[ \t]*$/, '') : line);
    if (end) {
      statements.push(lines.join('\n').trim());
      lines = [];
    }
  }
  statements.push(lines.join('\n').trim());
  return statements.filter(Boolean);
}

async function lock(client: pg.PoolClient, log: MigrationLog): Promise<void> {
  for (let tries = 1; ; tries++) {
    const { rows } = await client.query<{ locked: boolean }>('select pg_try_advisory_lock($1) as locked', [
      MIGRATION_LOCK_ID,
    ]);
    if (rows[0]!.locked) return;
    // Said once, naming the holder: a start that waits in silence looks hung (review).
    if (tries === 1) {
      const holder = await client.query<{ pid: number; app: string }>(
        `select l.pid, a.application_name as app from pg_locks l join pg_stat_activity a using (pid)
          where l.locktype = 'advisory' and l.granted and l.objsubid = 1
            and ((l.classid::bigint << 32) | l.objid::bigint) = $1`,
        [MIGRATION_LOCK_ID],
      );
      const who = holder.rows[0]
        ? `PostgreSQL ${sessionName(holder.rows[0].pid, holder.rows[0].app)}`
        : 'a session that just let go';
      log.info(`waiting for another instance's migrations: ${who} holds the migration lock`);
    }
    await sleep(LOCK_POLL_MS);
  }
}

export async function migrate(
  pool: pg.Pool,
  log: MigrationLog = { info: () => {}, warn: () => {} },
  options: MigrateOptions = {},
): Promise<string[]> {
  const lockTimeoutMs = options.lockTimeoutMs ?? DEFAULT_MIGRATION_LOCK_TIMEOUT_MS;
  const lockAttempts = options.lockAttempts ?? DEFAULT_LOCK_ATTEMPTS;
  // A start's first connection (serve and migrate alike): what stops it is told as the database's setting's (probe:
  // "The server does not support SSL connections" named none).
  const client = await pool.connect().catch((err: unknown) => {
    throw new DatabaseConnectionError(err);
  });
  const applied: string[] = [];
  try {
    // Without the database's or role's statement_timeout and lock_timeout (an operator's safety net for the
    // service's queries): a migration's statement may take minutes by design (a CONCURRENTLY build waits for the
    // transactions older than it; 0026 rewrites a table), and under a 30 s one it failed every time, rerun whole
    // (probe). Its lock waits are bounded by lockTimeoutMs instead. Given back below.
    await client.query('set statement_timeout = 0; set lock_timeout = 0');
    await lock(client, log);
    // Created, or given its checksum column, only where it lacks them: a start with nothing to apply changes no
    // schema, so a role that may read and write the tables but not change them can serve a database its owner
    // migrated (`svc migrate`); `create table if not exists` alone was refused to it (probe).
    const [has] = (
      await client.query<{ table: boolean; checksum: boolean }>(
        `select to_regclass('schema_migrations') is not null as table,
                exists (select from pg_attribute where attrelid = to_regclass('schema_migrations')
                          and attname = 'checksum' and not attisdropped) as checksum`,
      )
    ).rows;
    try {
      if (!has!.table) {
        await client.query(
          `create table schema_migrations (
             version text primary key, name text not null, applied_at timestamptz not null default now())`,
        );
      }
      if (!has!.checksum) await client.query('alter table schema_migrations add column checksum text');
    } catch (error) {
      throw await refusedForWantOfPrivilege(client, error, 'the table of applied migrations cannot be made');
    }
    const files = options.files ?? (await listMigrations());
    const known = new Map(files.map((f) => [f.version, f]));
    const { rows } = await client.query<{ version: string; name: string; checksum: string | null }>(
      'select version, name, checksum from schema_migrations order by version',
    );
    const newer = rows.filter((r) => !known.has(r.version)).map((r) => r.name);
    if (newer.length > 0) {
      log.warn(
        `the database has migrations this version does not have (${newer.join(', ')}): a newer version migrated it, and this one may not work with it`,
      );
    }
    for (const row of rows) {
      const file = known.get(row.version);
      if (!file) continue;
      // Applied before checksums were kept: what is there now is taken as what was applied.
      if (row.checksum === null) {
        await client.query('update schema_migrations set checksum = $2 where version = $1', [
          row.version,
          file.checksum,
        ]);
      } else if (row.checksum !== file.checksum) {
        throw new Error(
          `migration ${file.name} was changed after it was applied to this database; a shipped migration is never edited (add the next number instead): restore it as it was applied`,
        );
      }
    }
    const done = new Set(rows.map((r) => r.version));
    for (const file of files) {
      if (done.has(file.version)) continue;
      await applyWithinLockWaits(client, file, { lockTimeoutMs, lockAttempts }, log);
      applied.push(file.name);
      log.info(`applied migration ${file.name}`);
    }
    await runQueueMigrations({ pgPool: pool, schema: JOB_QUEUE_SCHEMA, logger: silentQueueLogger }).catch(
      async (error: unknown) => {
        throw await refusedForWantOfPrivilege(client, error, "the job queue's migrations failed");
      },
    );
  } finally {
    await client.query('select pg_advisory_unlock($1)', [MIGRATION_LOCK_ID]).catch(() => {});
    // The connection goes back to the pool with the database's timeouts, or not at all.
    await client.query('reset statement_timeout; reset lock_timeout').then(
      () => client.release(),
      (error: Error) => client.release(error),
    );
  }
  return applied;
}

/**
 * Applies the file, trying again (after a pause) each time a lock wait runs out, or PostgreSQL ends a deadlock
 * with the migration's transaction, up to `lockAttempts` tries: either way that transaction was undone, and the
 * other transactions, the old instances' work, went on. A no-transaction file goes on from the statement that was
 * undone: the ones before it are done (review: from the top, 0042 rebuilt both its indexes on each try, and its
 * first statement, a CONCURRENTLY drop, waited with no bound for the very transaction the try had given way to).
 */
async function applyWithinLockWaits(
  client: pg.PoolClient,
  file: MigrationFile,
  { lockTimeoutMs, lockAttempts }: { lockTimeoutMs: number; lockAttempts: number },
  log: MigrationLog,
): Promise<void> {
  const endings = new Set<string>();
  const progress = { statementsDone: 0 };
  for (let attempt = 1; ; attempt++) {
    try {
      return await apply(client, file, lockTimeoutMs, progress);
    } catch (error) {
      const code = pgErrorCode((error as Error).cause);
      // A deadlock: the migration locked two tables in another order than a transaction of the service (review: a
      // first 0041 failed the upgrade 8 times in 9 under token traffic). PostgreSQL rolled back the transaction it
      // was in, as a lock wait that ran out is.
      const undone =
        code === PG_LOCK_NOT_AVAILABLE
          ? `waited ${lockTimeoutMs} ms for a table lock`
          : code === PG_DEADLOCK
            ? 'ended in a deadlock with another transaction'
            : null;
      if (undone === null) throw error;
      endings.add(undone);
      if (attempt >= lockAttempts) {
        const holders = code === PG_LOCK_NOT_AVAILABLE ? await longTransactions(client, lockTimeoutMs) : [];
        throw new Error(
          `migration ${file.name} failed: it ${[...endings].join(' or ')} ${attempt} times; ` +
            (holders.length
              ? `transactions open longer than that: ${holders.join('; ')}`
              : code === PG_LOCK_NOT_AVAILABLE
                ? 'no transaction is open that long now: start again'
                : 'start again'),
          { cause: error },
        );
      }
      log.warn(`migration ${file.name} ${undone} (try ${attempt} of ${lockAttempts}): undone, trying again`);
      await sleep(Math.min(lockTimeoutMs, 1_000));
    }
  }
}

/** A PostgreSQL session as the log names it: its pid, and its application when it gave one. */
function sessionName(pid: number, app: string): string {
  return `pid ${pid}${app ? ` (${app})` : ''}`;
}

/**
 * Other sessions' transactions open longer than `ms`: what a lock wait that long most likely waited for. And those
 * of other roles in a transaction, whose start PostgreSQL hides from a role without pg_read_all_stats: the owner
 * running `svc migrate` beside instances of a role of their own (README "Least privilege") was told no transaction
 * was open while one of theirs held the lock (review), and, listing their every session, heard of each idle one.
 */
async function longTransactions(client: pg.PoolClient, ms: number): Promise<string[]> {
  const { rows } = await client.query<{
    pid: number;
    app: string;
    role: string;
    state: string;
    secs: number;
    query: string;
    hidden: boolean;
  }>(
    `select pid, application_name as app, usename as role, state,
            extract(epoch from now() - xact_start)::int as secs, left(query, 120) as query, hidden
       from pg_stat_activity a, lateral (select query = '<insufficient privilege>' as hidden) h
      where datname = current_database() and pid <> pg_backend_pid()
        and (xact_start < now() - make_interval(secs => $1::double precision / 1000)
             -- hidden: in a transaction (its own virtualxid lock), not one of an instance's idle connections
             or (hidden and exists (
                   select from pg_locks l where l.pid = a.pid and l.locktype = 'virtualxid' and l.granted)))
      order by xact_start nulls last, pid`,
    [ms],
  );
  const sessions = rows.map((r) =>
    r.hidden
      ? `${sessionName(r.pid, r.app)} of role ${r.role}, in a transaction this role may not see`
      : `${sessionName(r.pid, r.app)}, ${r.state} for ${r.secs} s, last query: ${r.query}`,
  );
  return rows.some((r) => r.hidden)
    ? [...sessions, "(PostgreSQL hides other roles' transactions from this one: grant it pg_read_all_stats)"]
    : sessions;
}

async function inBoundedTransaction(
  client: pg.PoolClient,
  lockTimeoutMs: number,
  work: () => Promise<unknown>,
): Promise<void> {
  await client.query('begin');
  await client.query(`select set_config('lock_timeout', $1, true)`, [`${lockTimeoutMs}ms`]);
  await work();
  await client.query('commit');
}

/**
 * Where a no-transaction file is tried again after its statement `i`, a CONCURRENTLY one, failed (PostgreSQL ended
 * a deadlock with it): a build stopped halfway leaves an invalid index, which the drop before it clears, so at that
 * drop; a drop, at itself; else, whatever it is, from the top (review: from the top, a deadlock at a file's last
 * build rebuilt every index before it).
 */
function retryFrom(statements: string[], i: number): number {
  if (/^drop index concurrently /i.test(statements[i]!)) return i;
  const built = /^create (?:unique )?index concurrently (?:if not exists )?(\S+)/i.exec(statements[i]!)?.[1];
  const dropFirst =
    built && statements[i - 1]?.toLowerCase() === `drop index concurrently if exists ${built}`.toLowerCase();
  return dropFirst ? i - 1 : 0;
}

/** `progress`: how many statements of a no-transaction file are done, where a try begins and ends. */
async function apply(
  client: pg.PoolClient,
  file: MigrationFile,
  lockTimeoutMs: number,
  progress: { statementsDone: number },
): Promise<void> {
  const record = () =>
    client.query('insert into schema_migrations (version, name, checksum) values ($1, $2, $3)', [
      file.version,
      file.name,
      file.checksum,
    ]);
  try {
    if (NO_TRANSACTION.test(file.sql.split('\n', 1)[0]!)) {
      const statements = plainStatements(file.sql);
      for (let i = progress.statementsDone; i < statements.length; i++) {
        const statement = statements[i]!;
        // A CONCURRENTLY build waits for older transactions without holding up anyone else's writes: it may
        // wait. Any other statement (an ALTER TABLE) gets the bounded wait, in a transaction of its own.
        if (CONCURRENT.test(statement)) {
          await client.query(statement).catch((error: unknown) => {
            progress.statementsDone = retryFrom(statements, i);
            throw error;
          });
        } else await inBoundedTransaction(client, lockTimeoutMs, () => client.query(statement));
        progress.statementsDone = i + 1;
      }
      await record();
      return;
    }
    await inBoundedTransaction(client, lockTimeoutMs, async () => {
      await client.query(file.sql);
      await record();
    });
  } catch (error) {
    await client.query('rollback').catch(() => {});
    const wanted = await ownerWanted(client, error);
    throw new Error(`migration ${file.name} failed: ${(error as Error).message}${wanted}`, { cause: error });
  }
}

/**
 * `error` as itself, or, when PostgreSQL refused it for want of privilege, as what it stopped (`what`) and what to
 * do (ownerWanted).
 */
async function refusedForWantOfPrivilege(
  client: pg.PoolClient,
  error: unknown,
  what: string,
): Promise<unknown> {
  const wanted = await ownerWanted(client, error);
  return wanted ? new Error(`${what}: ${(error as Error).message}${wanted}`, { cause: error }) : error;
}

/**
 * What to do when a migration was refused for want of privilege, to append to its error, or '': a role that may use
 * the tables but not change them (README "Least privilege") serves a database its owner migrated, and a start of a
 * new version under it finds a migration to apply (or, on a database nobody migrated, every one).
 */
async function ownerWanted(client: pg.PoolClient, error: unknown): Promise<string> {
  if (pgErrorCode(error) !== PG_INSUFFICIENT_PRIVILEGE) return '';
  const role = await client.query<{ role: string }>('select current_user as role').then(
    (r) => r.rows[0]!.role,
    () => 'unknown',
  );
  return `: this role (${role}) may not change the schema: run \`svc migrate\` as the database's owner, then start again`;
}
