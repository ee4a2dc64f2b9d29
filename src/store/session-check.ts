import { randomBytes } from 'node:crypto';
import type pg from 'pg';
import { DatabaseConnectionError } from '../lib/database-connection-error.ts';
import { PG_READ_ONLY_TRANSACTION, pgErrorCode } from './pg-error-codes.ts';

/** How long a notification to the check's own LISTEN may take to arrive (it takes about a millisecond). */
const NOTIFICATION_WAIT_MS = 5_000;

/**
 * Refuses a database whose connections are not sessions of their own: a pooler in transaction or statement mode
 * (PgBouncer's `pool_mode`) between the service and PostgreSQL. The service needs one session per connection: the
 * LISTEN connection's notifications (cache invalidation, so a revoked key stops working everywhere; webhook
 * wake-ups), the migration's advisory lock, the session settings (database.ts), the job queue's prepared
 * statements. Behind such a pooler each of these failed silently, or in misleading words (probe: a revoked key kept
 * working on the other instance for minutes, with nothing logged; the migration lock outlived `svc migrate`).
 *
 * Told first by the backends that answer (two connections held at once never share a backend pid, and one
 * connection's statements all run on its own), which shows a pooler that hands its most recent server connection
 * to the next client (PgBouncer's default) at once. Then by a notification, whatever order the pooler hands its
 * server connections in (review: in turn, they passed the pid checks): one connection listens, the other notifies,
 * and only a session of its own hears it. Behind the pooler, the listening server connection sits idle in the
 * pool, linked to no client, and the notification is dropped, or it ran the NOTIFY itself for the other client,
 * who then got it.
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
          : await notificationUnheard(first, second);
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

/** Why a notification `second` sent to `first`'s LISTEN was not heard, or null when it was. */
async function notificationUnheard(first: pg.PoolClient, second: pg.PoolClient): Promise<string | null> {
  // A channel of this check alone: instances starting together do not hear each other's.
  const channel = `svc_session_check_${randomBytes(8).toString('hex')}`;
  try {
    await first.query(`listen ${channel}`);
  } catch (error) {
    // A standby takes no LISTEN (25006, during recovery). The service starts on one all the same, answering its
    // writes 503 until a failover makes it the primary (README Operations): the pids are all there is to go by.
    if (pgErrorCode(error) === PG_READ_ONLY_TRANSACTION) return null;
    throw error;
  }
  let timer: NodeJS.Timeout | undefined;
  let onNotification: ((message: pg.Notification) => void) | undefined;
  try {
    const heard = new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(false), NOTIFICATION_WAIT_MS);
      onNotification = (message) => {
        if (message.channel === channel) resolve(true);
      };
      first.on('notification', onNotification);
    });
    await second.query('select pg_notify($1, $2)', [channel, '']);
    if (await heard) return null;
    return `a notification to one connection's LISTEN did not arrive within ${NOTIFICATION_WAIT_MS / 1000} s`;
  } finally {
    clearTimeout(timer);
    if (onNotification) first.off('notification', onNotification);
    // Given back to the pool listening to nothing; a connection lost meanwhile is dropped by the pool, and its
    // error is the one to tell, not this one's.
    await first.query(`unlisten ${channel}`).catch(() => {});
  }
}
