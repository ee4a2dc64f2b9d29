import type pg from 'pg';
import { DatabaseConnectionError } from '../lib/database-connection-error.ts';

/**
 * Refuses a database whose connections are not sessions of their own: a pooler in transaction or statement mode
 * (PgBouncer's `pool_mode`) between the service and PostgreSQL. The service needs one session per connection: the
 * LISTEN connection's notifications (cache invalidation, so a revoked key stops working everywhere; webhook
 * wake-ups), the migration's advisory lock, the session settings (database.ts), the job queue's prepared
 * statements. Behind such a pooler each of these failed silently, or in misleading words (probe: a revoked key kept
 * working on the other instance for minutes, with nothing logged; the migration lock outlived `svc migrate`).
 *
 * Told by the backends that answer: two connections held at once are two sessions, so they never share a backend
 * pid, and a connection's statements all run on the one it got. A pooler that hands its most recent server
 * connection to the next client (PgBouncer's default) shows the first; one that hands them round, the second.
 */
export async function refuseSharedSessions(pool: pg.Pool): Promise<void> {
  const connect = () =>
    pool.connect().catch((err: unknown) => {
      throw new DatabaseConnectionError(err);
    });
  const backendOf = async (client: pg.PoolClient) =>
    (await client.query<{ pid: number }>('select pg_backend_pid() as pid')).rows[0]!.pid;
  const first = await connect();
  let second: pg.PoolClient | undefined;
  try {
    const pid = await backendOf(first);
    second = await connect();
    const otherPid = await backendOf(second);
    const againPid = await backendOf(first);
    const shared =
      otherPid === pid
        ? `two connections held at once ran on one PostgreSQL backend (pid ${pid})`
        : againPid !== pid
          ? `one connection's statements ran on two PostgreSQL backends (pids ${pid} and ${againPid})`
          : null;
    if (shared)
      throw new Error(
        `DATABASE_URL: ${shared}: a pooler in transaction or statement mode is in between. svc needs a session ` +
          'per connection (LISTEN for cache invalidation and webhook wake-ups, the migration lock, session ' +
          "settings, the job queue's prepared statements): use a pooler in session mode (PgBouncer's " +
          'pool_mode=session), or connect to PostgreSQL directly',
      );
  } finally {
    second?.release();
    first.release();
  }
}
