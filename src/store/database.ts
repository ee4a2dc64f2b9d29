import {
  Kysely,
  PostgresDialect,
  type PostgresCursor,
  type PostgresPool,
  type PostgresPoolClient,
  type PostgresQueryResult,
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

export interface Store {
  /** The pool itself: no bound on statements (migrations, the job queue). */
  pool: pg.Pool;
  /** Statements bounded by STATEMENT_ANSWER_TIMEOUT_MS. */
  db: Db;
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
const SESSION_SETTINGS: Readonly<Record<string, string>> = { idle_in_transaction_session_timeout: '60s' };

export function createStore(
  databaseUrl: string,
  options: {
    max?: number;
    /** More settings for this store's connections (e.g. the webhook bookkeeping's synchronous_commit). */
    sessionSettings?: Readonly<Record<string, string>>;
  } = {},
): Store {
  const settings = Object.entries({ ...SESSION_SETTINGS, ...options.sessionSettings });
  const apply = `select ${settings.map((_, i) => `set_config($${2 * i + 1}, $${2 * i + 2}, false)`).join(', ')}`;
  const pool = new pg.Pool({
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
  // A server that drops connections must not crash the process: idle and checked-out client errors are
  // reported by the query that hits them, and the pool replaces the client.
  pool.on('error', () => {});
  // graphile-worker, which runs on this pool, also wants each client to have one (it warns otherwise).
  pool.on('connect', (client) => client.on('error', () => {}));
  const db = new Kysely<Database>({
    dialect: new PostgresDialect({ pool: answeringWithin(pool, STATEMENT_ANSWER_TIMEOUT_MS) }),
  });
  return {
    pool,
    db,
    close: async () => {
      await db.destroy();
      // Kysely adopts the pool only on its first query; a process that used the pool alone (svc migrate)
      // would otherwise keep idle connections, and itself, alive for idleTimeoutMillis.
      if (!pool.ending) await pool.end();
    },
  };
}

/**
 * `pool` as Kysely sees it, with every statement bounded: one that gets no answer within `timeoutMs` ends
 * its connection, and the pool discards that connection when Kysely releases it. The statement fails with a
 * message that starts as pg's own for a lost connection ("Connection terminated"), which the error handler
 * answers with a retryable 503.
 */
function answeringWithin(pool: pg.Pool, timeoutMs: number): PostgresPool {
  return {
    connect: async () => new BoundedClient(await pool.connect(), timeoutMs),
    end: async () => {
      if (!pool.ending) await pool.end();
    },
  };
}

class BoundedClient implements PostgresPoolClient {
  /** A statement got no answer and the connection was ended: what follows on it (a rollback) fails alike. */
  private ended = false;

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
