import { AsyncLocalStorage } from 'node:async_hooks';
import {
  Kysely,
  PostgresDialect,
  type PostgresCursor,
  type PostgresPool,
  type PostgresPoolClient,
  type PostgresQueryResult,
  sql,
  type Transaction,
} from 'kysely';
import pg from 'pg';
import type { Database } from './schema.ts';
import { within } from '../lib/within.ts';

export type Db = Kysely<Database>;
export type Trx = Transaction<Database>;
/** A query executor: the pool-backed Db or an open transaction. Repositories accept either. */
export type Executor = Db | Trx;

/**
 * Runs `work` in one snapshot of the database: a read-only REPEATABLE READ transaction. For reads that must
 * agree with each other, such as a page and its total, or an account's tenants and its pending tenant
 * changes: as separate statements (each READ COMMITTED statement its own snapshot), or statements sent at
 * once on two pooled connections, they can straddle a commit and show a state that never was.
 */
export function inOneSnapshot<T>(db: Db, work: (trx: Trx) => Promise<T>): Promise<T> {
  return db.transaction().setIsolationLevel('repeatable read').setAccessMode('read only').execute(work);
}

// int8 (bigserial, count(*)) as a JS number: our int8 values (counts, sequence positions, epoch ms) stay far
// below 2^53. numeric stays a string for decimal arithmetic.
pg.types.setTypeParser(pg.types.builtins.INT8, (value) => Number(value));

/**
 * A PostgreSQL that stops answering without closing its connections (a network partition, a failover, a
 * hung host) must cost a request a bounded wait and a 503, not a hang. Three bounds:
 *
 * - Getting a connection (a new one, or a free one of a full pool) waits at most CONNECT_TIMEOUT_MS; pg-pool
 *   then fails with "timeout exceeded when trying to connect", which the error handler answers with a
 *   retryable 503. Long enough for a TLS handshake to a remote server, short against a client's patience.
 *   A new connection's session settings then get SETTINGS_ANSWER_TIMEOUT_MS more, and fail it as a
 *   terminated connection (a retryable 503 too).
 * - TCP keepalive, probing after KEEPALIVE_IDLE_MS of silence, lets the kernel declare a connection dead
 *   whose peer vanished while no statement was waiting (idle in the pool, or a statement in progress).
 * - A statement sent through Kysely (every statement of the API, the domain services and their jobs,
 *   including the quote purge's batches) that gets no answer within STATEMENT_ANSWER_TIMEOUT_MS fails, and
 *   its connection is ended, so that the pool does not hand that connection out again.
 *
 * The last bound is ours, on the client, rather than PostgreSQL's statement_timeout: that one is enforced by
 * the server, and a server that does not answer does not enforce anything. It is not pg's query_timeout
 * either, for two reasons. That option applies to every user of the pool, and the pool is also what the
 * migrations (an index build, the wait for another instance's migrations under the advisory lock) and
 * graphile-worker's own machinery run on: legitimately long statements that must not be cut; they use
 * `pool` directly, and keep only the connect bound and keepalive. And when query_timeout fires, pg leaves the
 * unanswered statement active on the connection and the pool takes it back as healthy, so the next statement
 * there queues behind one that will never complete.
 *
 * 30 s is far beyond any statement of ours on a healthy server (API statements take milliseconds; each purge
 * batch deletes at most 5,000 rows), so the bound only ever cuts a server that is gone. No caller needs
 * another value, so it is not an option.
 */
const CONNECT_TIMEOUT_MS = 5_000;
/** A server that answered the connect answers `select set_config(…)` in milliseconds. */
const SETTINGS_ANSWER_TIMEOUT_MS = 2_000;
export const KEEPALIVE_IDLE_MS = 10_000;
const STATEMENT_ANSWER_TIMEOUT_MS = 30_000;
/** A probe's connect, and its statement, each get this: within a load balancer's usual probe timeout (2–5 s). */
const PROBE_ANSWER_TIMEOUT_MS = 2_000;
/**
 * The probe's connection is made afresh this often: a database or role made read only (`ALTER DATABASE … SET
 * default_transaction_read_only`) is so for sessions that start after it only, and a kept session went on saying
 * ready while every new connection's writes failed (review).
 */
const PROBE_CONNECTION_LIFETIME_S = 30;

export interface Store {
  /** The pool itself: no bound on statements (migrations, the job queue). */
  pool: pg.Pool;
  /** Statements bounded by STATEMENT_ANSWER_TIMEOUT_MS. */
  db: Db;
  /**
   * Resolves when PostgreSQL answers within PROBE_ANSWER_TIMEOUT_MS that it takes writes, on a connection of its own
   * outside the pool (for /readyz): whether the database answers, not whether the pool has a free connection.
   * Through the pool, a probe queued behind busy connections (a contended row, a burst of slow requests) and
   * failed: every instance sharing that database answered 503 at once, and a load balancer pulled them all
   * (probe). Its connection is made at the first probe and kept; one that gets no answer is ended, and the
   * next probe connects afresh.
   */
  probe(): Promise<void>;
  close(): Promise<void>;
}

/**
 * Settings every connection of a store is given when it is made. A backend whose client vanished in a
 * transaction (a partition that never delivers the connection's end) holds its row locks until the server's
 * TCP keepalive gives up, two hours by default: the settlements, tenant changes and deposits of those rows
 * waited as long (review: trades left unsettled after a frozen connection). Our transactions are never idle
 * for more than a few milliseconds, so a minute only ends such a backend.
 *
 * Set by a statement on each new connection, not in the startup packet (`options=-c …`): a pooler in front of
 * PostgreSQL (PgBouncer) refuses an `options` parameter, and every connection failed (review).
 */
const SESSION_SETTINGS: Readonly<Record<string, string>> = {
  idle_in_transaction_session_timeout: '60s',
  // pg reads dates and intervals in PostgreSQL's default styles only: on a database set to another (`SQL, DMY`,
  // an operator's locale), every timestamptz came back null and every interval empty, and the service answered
  // 500 after committing (probe).
  DateStyle: 'ISO, MDY',
  IntervalStyle: 'postgres',
  // The services lock a row, then read it again or change it by what it holds now, which needs each statement to
  // see what committed before it: on a database whose default is 'serializable' (or 'repeatable read'), a
  // transaction that waited for another's lock was refused instead (40001), and a repeated trade advance
  // answered 503 where it says 409 (probe). A read that wants one snapshot asks for it (inOneSnapshot).
  default_transaction_isolation: 'read committed',
};

export function createStore(
  databaseUrl: string,
  options: {
    max?: number;
    /** More settings for this store's connections (e.g. the webhook bookkeeping's synchronous_commit). */
    sessionSettings?: Readonly<Record<string, string>>;
    /** How long the readiness probe's connection is kept (PROBE_CONNECTION_LIFETIME_S; shorter in tests). */
    probeConnectionLifetimeS?: number;
  } = {},
): Store {
  const settings = Object.entries({ ...SESSION_SETTINGS, ...options.sessionSettings });
  const apply = `select ${settings.map((_, i) => `set_config($${2 * i + 1}, $${2 * i + 2}, false)`).join(', ')}`;
  const pool = quietPool({
    connectionString: databaseUrl,
    max: options.max ?? 20,
    // A dropped server connection must not crash the process; the pool replaces it.
    idleTimeoutMillis: 30_000,
    connectionTimeoutMillis: CONNECT_TIMEOUT_MS,
    keepAlive: true,
    keepAliveInitialDelayMillis: KEEPALIVE_IDLE_MS,
    // Awaited by the pool before the connection is handed out. Queued on the client from its 'connect'
    // event instead, the caller's first statement went in while this one ran, which pg deprecates (a
    // warning on every start, an error in pg 9). A setting the server refuses leaves the connection as it
    // was (the settings are a safeguard); a server that does not answer them fails the connection, as a
    // connect that gets no answer does.
    onConnect: (client: pg.ClientBase) =>
      within(
        client.query(apply, settings.flat()).then(
          () => {},
          () => {},
        ),
        SETTINGS_ANSWER_TIMEOUT_MS,
      ).catch((silence: Error) => {
        // In pg's words for a lost connection, which the error handler answers with a retryable 503.
        throw new Error(`Connection terminated: the session settings got ${silence.message}`);
      }),
  });
  const db = new Kysely<Database>({
    dialect: new PostgresDialect({ pool: answeringWithin(pool, STATEMENT_ANSWER_TIMEOUT_MS) }),
  });
  let probeDb: Db | null = null;
  let closed = false;
  return {
    pool,
    db,
    probe: async () => {
      // Made at the first probe: one after the close would open a connection nothing closes (review).
      if (closed) throw new Error('the store is closed');
      probeDb ??= new Kysely<Database>({
        dialect: new PostgresDialect({
          pool: answeringWithin(
            quietPool({
              connectionString: databaseUrl,
              max: 1,
              idleTimeoutMillis: 60_000,
              maxLifetimeSeconds: options.probeConnectionLifetimeS ?? PROBE_CONNECTION_LIFETIME_S,
              connectionTimeoutMillis: PROBE_ANSWER_TIMEOUT_MS,
              keepAlive: true,
              keepAliveInitialDelayMillis: KEEPALIVE_IDLE_MS,
            }),
            PROBE_ANSWER_TIMEOUT_MS,
          ),
        }),
      });
      // A database that answers but takes no write (a standby after a failover, or read only for maintenance)
      // cannot serve: every write would fail (probe: ready, while every write answered 500).
      const { rows } = await sql<{
        read_only: string;
      }>`select current_setting('transaction_read_only') as read_only`.execute(probeDb);
      if (rows[0]?.read_only !== 'off') throw new Error('the database takes no writes (read only)');
    },
    close: async () => {
      closed = true;
      await probeDb?.destroy();
      await db.destroy();
      // Kysely adopts the pool only on its first query; a process that used the pool alone (svc migrate)
      // would otherwise keep idle connections, and itself, alive for idleTimeoutMillis.
      if (!pool.ending) await pool.end();
    },
  };
}

/**
 * A pool whose dropped connections do not crash the process: idle and checked-out client errors are reported
 * by the query that hits them, and the pool replaces the client. graphile-worker, which runs on the store's
 * pool, also wants each client to have a handler (it warns otherwise).
 */
function quietPool(config: pg.PoolConfig): pg.Pool {
  const pool = new pg.Pool(config);
  pool.on('error', () => {});
  pool.on('connect', (client) => client.on('error', () => {}));
  return pool;
}

/**
 * `pool` as Kysely sees it, with every statement bounded: one that gets no answer within `timeoutMs` ends
 * its connection, and the pool discards that connection when Kysely releases it. The statement fails with a
 * message that starts as pg's own for a lost connection ("Connection terminated"), which the error handler
 * answers with a retryable 503.
 */
function answeringWithin(pool: pg.Pool, timeoutMs: number): PostgresPool {
  return {
    connect: async () => {
      const client = await pool.connect().catch((error: unknown) => {
        if (error instanceof pg.DatabaseError) connectRefusals.add(error);
        throw error;
      });
      return new BoundedClient(client, timeoutMs);
    },
    end: async () => {
      if (!pool.ending) await pool.end();
    },
  };
}

/** The errors PostgreSQL answered a new connection of a store with (see `refusedConnection`). */
const connectRefusals = new WeakSet<Error>();

/**
 * Whether `error` is PostgreSQL's refusal of a new connection, whatever its reason: a database taken out for
 * maintenance (`allow_connections false`, 55000), a role that may not log in or whose password changed (28000,
 * 28P01), a database gone (3D000). The statement it was for never ran; the database is away for this instance as
 * surely as when it does not answer, and the request gets the same retryable 503 (probe: each got a 500, which
 * clients do not retry, and an error line with its stack).
 */
export function refusedConnection(error: unknown): boolean {
  return error instanceof Error && connectRefusals.has(error);
}

/**
 * A write whose connection was lost before its answer came: a COMMIT of a transaction that wrote, or a
 * statement outside any transaction (which commits on its own) that may write (`mayWrite`). PostgreSQL may
 * have carried it out or not; nobody can tell from here. Spec 7 gives such a request a 502 (an idempotence
 * check before any retry), not the 503 of a failure known to have written nothing: a lost statement inside a
 * transaction, before its COMMIT, is rolled back for certain. (A request that fails after one of its writes
 * committed is half done too: the HTTP error handler says so, with `committedAWrite`.)
 */
export class OutcomeUnknownError extends Error {
  constructor(cause: unknown) {
    super(`outcome unknown: the connection was lost before PostgreSQL answered (${describe(cause)})`, {
      cause,
    });
    this.name = 'OutcomeUnknownError';
  }
}

function describe(error: unknown): string {
  return error instanceof Error ? error.message : String(error);
}

/**
 * Whether a piece of work (an API request) has committed a write yet, for as long as it runs (node's
 * AsyncLocalStorage follows it through its awaits): a connection lost after one leaves it half done, of
 * unknown outcome, even in a read or a transaction that the loss rolls back.
 */
const writesOfThisWork = new AsyncLocalStorage<{ wrote: boolean }>();

/** Runs `work` (and everything it awaits) with its writes tracked (see OutcomeUnknownError). */
export function trackingWrites<T>(work: () => T): T {
  return writesOfThisWork.run({ wrote: false }, work);
}

/** Whether the work under way (`trackingWrites`) has committed a write. */
export function committedAWrite(): boolean {
  return writesOfThisWork.getStore()?.wrote === true;
}

/**
 * This schema's functions that write (migrations 0008 and 0026), which a `select` may call. A lost `select` that
 * calls none of them changed nothing, whatever its outcome (test/integration/statement-writes.test.ts keeps
 * the list in step with the migrations).
 */
export const WRITING_FUNCTIONS = [
  'webhook_lease_partitions',
  'webhook_record_attempts',
  'webhook_wake_lane',
] as const;
/**
 * graphile-worker's functions that write and that this service calls in statements of its own (src/jobs:
 * enqueueJob; the liveness reaper runs on the raw pool): a job added is a write (review).
 */
export const QUEUE_WRITING_FUNCTIONS = ['graphile_worker.add_job', 'graphile_worker.add_jobs'] as const;
const CALLS_A_WRITING_FUNCTION = new RegExp(
  `\\b(${[...WRITING_FUNCTIONS, ...QUEUE_WRITING_FUNCTIONS].map((f) => f.replace('.', '\\s*\\.\\s*')).join('|')})\\s*\\(`,
  'i',
);

/**
 * Whether a statement sent on its own may have changed data: anything but a `select` that calls none of this
 * schema's writing functions (a `with` may hold an insert; data-modifying statements start otherwise).
 */
export function mayWrite(sql: string): boolean {
  return !/^\s*select\b/i.test(sql) || CALLS_A_WRITING_FUNCTION.test(sql);
}

/**
 * The connection went away with the statement (pg's "Connection terminated…", "…not queryable", a socket
 * error, an ended or shut-down backend), as opposed to an answer from PostgreSQL, which says what happened.
 */
function isConnectionLoss(error: unknown): boolean {
  const code = (error as { code?: unknown } | null)?.code;
  if (typeof code === 'string') {
    return /^(08|57P0)/.test(code) || ['ECONNRESET', 'EPIPE', 'ETIMEDOUT'].includes(code);
  }
  return /Connection terminated|is not queryable/i.test(describe(error));
}

class BoundedClient implements PostgresPoolClient {
  /** A statement got no answer and the connection was ended: what follows on it (a rollback) fails alike. */
  private ended = false;
  /** In a transaction Kysely began on this connection (from its `begin`/`start transaction` to its end). */
  private transaction: 'none' | 'read write' | 'read only' = 'none';
  /** The transaction has run a statement that may write (a COMMIT of one that did not writes nothing). */
  private transactionWrites = false;
  /** A write's connection was lost: the rollback Kysely then sends fails with the same error, not its own. */
  private outcomeUnknown: OutcomeUnknownError | null = null;

  constructor(
    private readonly client: pg.PoolClient,
    private readonly timeoutMs: number,
  ) {}

  query<R>(sql: string, parameters: ReadonlyArray<unknown>): Promise<PostgresQueryResult<R>>;
  query<R>(cursor: PostgresCursor<R>): PostgresCursor<R>;
  query<R>(
    sqlOrCursor: string | PostgresCursor<R>,
    parameters: ReadonlyArray<unknown> = [],
  ): Promise<PostgresQueryResult<R>> | PostgresCursor<R> {
    // Kysely passes a cursor only to stream, which needs a cursor class in the dialect's config: none is.
    if (typeof sqlOrCursor !== 'string') throw new Error('streaming is not configured');
    return this.bounded<R>(sqlOrCursor, parameters);
  }

  release(): void {
    // An ended connection is discarded by the pool, not handed out again.
    this.client.release(this.ended ? this.unanswered() : undefined);
  }

  private unanswered(cause?: unknown): Error {
    return new Error(`Connection terminated: PostgreSQL did not answer within ${this.timeoutMs} ms`, {
      cause,
    });
  }

  private async bounded<R>(sql: string, parameters: ReadonlyArray<unknown>): Promise<PostgresQueryResult<R>> {
    if (this.outcomeUnknown) throw this.outcomeUnknown;
    // Kysely's own transaction statements (PostgresDriver): `begin`, `start transaction …`, `commit`, `rollback`.
    const begins = sql === 'begin' || sql.startsWith('start transaction');
    const ends = sql === 'commit' || sql === 'rollback';
    const writes = !begins && !ends && mayWrite(sql);
    const commits = sql === 'commit' && this.transaction === 'read write' && this.transactionWrites;
    if (this.transaction === 'read write' && writes) this.transactionWrites = true;
    // A read outside a transaction changed nothing, whatever became of it: a plain retryable loss.
    const standaloneWrite = this.transaction === 'none' && writes;
    // What the work this statement belongs to (an API request: trackingWrites) has written so far.
    const work = writesOfThisWork.getStore();
    try {
      const result = await this.boundedStatement<R>(sql, parameters);
      if (begins) this.transaction = sql.endsWith('read only') ? 'read only' : 'read write';
      if (work && (commits || standaloneWrite)) work.wrote = true;
      return result;
    } catch (error) {
      if ((commits || standaloneWrite) && isConnectionLoss(error)) {
        this.outcomeUnknown = new OutcomeUnknownError(error);
        throw this.outcomeUnknown;
      }
      throw error;
    } finally {
      if (ends) {
        this.transaction = 'none';
        this.transactionWrites = false;
      }
    }
  }

  private async boundedStatement<R>(
    sql: string,
    parameters: ReadonlyArray<unknown>,
  ): Promise<PostgresQueryResult<R>> {
    if (this.ended) throw this.unanswered();
    let timedOut = false;
    const timer = setTimeout(() => {
      timedOut = true;
      this.ended = true;
      // With a statement in progress, end() closes the socket at once rather than saying goodbye.
      this.client.end().catch(() => {});
    }, this.timeoutMs);
    try {
      return (await this.client.query<R & pg.QueryResultRow>(sql, [...parameters])) as PostgresQueryResult<R>;
    } catch (error) {
      if (!timedOut) throw error;
      throw this.unanswered(error);
    } finally {
      clearTimeout(timer);
    }
  }
}
