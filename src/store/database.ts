import { Kysely, PostgresDialect, type Transaction } from 'kysely';
import pg from 'pg';
import type { Database } from './schema.ts';

export type Db = Kysely<Database>;
export type Trx = Transaction<Database>;
/** A query executor: the pool-backed Db or an open transaction. Repositories accept either. */
export type Executor = Db | Trx;

// int8 (bigserial, count(*)) as a JS number: our int8 values (counts, sequence positions, epoch ms) stay far
// below 2^53. numeric stays a string for decimal arithmetic.
pg.types.setTypeParser(pg.types.builtins.INT8, (value) => Number(value));

export interface Store {
  pool: pg.Pool;
  db: Db;
  close(): Promise<void>;
}

export function createStore(databaseUrl: string, options: { max?: number } = {}): Store {
  const pool = new pg.Pool({
    connectionString: databaseUrl,
    max: options.max ?? 20,
    // A dropped server connection must not crash the process; the pool replaces it.
    idleTimeoutMillis: 30_000,
  });
  // A server that drops connections must not crash the process: idle and checked-out client errors are
  // reported by the query that hits them, and the pool replaces the client.
  pool.on('error', () => {});
  pool.on('connect', (client) => client.on('error', () => {}));
  const db = new Kysely<Database>({ dialect: new PostgresDialect({ pool }) });
  return {
    pool,
    db,
    close: async () => {
      await db.destroy();
      // Kysely adopts the pool only on its first query; a process that used the pool alone (svc migrate)
      // would otherwise keep idle connections, and itself, alive for idleTimeoutMillis.
      if (!pool.ended) await pool.end();
    },
  };
}
