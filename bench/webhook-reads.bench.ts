/**
 * What a worker's reads of a backlog cost PostgreSQL (lane-reads.repository.ts readAfter): the service's read (migration
 * 0032's function, planned without sorts, its late commits in txid order since 0033) against the read as it was before
 * 0031 and before 0032 (copied below) and before 0033 (0032's function, created from its migration), on the same
 * database and backlogs, taking turns, under two kinds of statistics:
 * - quiet: taken while nothing was pending, as after any quiet hour: every partial index of the undelivered then
 *   looks empty to the planner. The read before 0031 went through one of them whole at each read, so that reading a
 *   backlog through cost the square of its length;
 * - none: a table never analysed (a new database, or before autovacuum's first look; autovacuum is off on the
 *   bench's table so that it stays so). The read of 0031 then read the partition index of the undelivered whole and
 *   sorted it, at each read (session 29: the worker's reads of a backlog of 60,000, 27 µs a notification). And once
 *   the table has grown (the rounds' delivered backlogs, never vacuumed), 0032's function read the late commits
 *   through that index, every undelivered notification and its dead entries at each read (from the third round of
 *   40,000).
 *
 * Measured: CPU time of the one backend that runs the reads (/proc), per notification read, for backlogs of each
 * size in BENCH_BACKLOGS (10000,40000), BENCH_ROUNDS rounds (3), statistics BENCH_STATS (quiet,none); the results are
 * the median ratios before/now.
 *
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres node --import tsx bench/webhook-reads.bench.ts
 *
 * Session 28 (quiet): before 0031 16-25 µs against 6 at 10,000; 49-76 against 7 at 40,000.
 */
import { readFileSync } from 'node:fs';
import { sql } from 'kysely';
import { BENCH_PLATFORM, BENCH_TRADE_PAYLOAD, median, procStatCpuMs } from './bench-support.ts';
import {
  cursorAfterRead,
  loadPartitions,
  readAfter,
  type ReadCursor,
} from '../src/domain/webhooks/lane-reads.repository.ts';
import { createStore, type Db } from '../src/store/database.ts';
import { createTestDatabase } from '../test/helpers/database.ts';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const BACKLOGS = (process.env.BENCH_BACKLOGS ?? '10000,40000').split(',').map(Number);
/** The worker's READ_LIMIT (book-reads.ts). */
const READ_LIMIT = 500;
const PARTITIONS = Array.from({ length: 64 }, (_, i) => i);
const STATS = (process.env.BENCH_STATS ?? 'quiet,none').split(',') as Array<'quiet' | 'none'>;

/** readAfter before migration 0031, as it was: the baseline. */
async function readAfterBefore0031(db: Db, cursor: ReadCursor, limit: number) {
  const { rows } = await sql<{ snap: string; seq: number | null }>`
    with s as materialized (select pg_current_snapshot()::text as snap),
    late as materialized (
      select w.* from webhook_notifications w
      where (w.txid = any (${cursor.openXids}::xid8[]) or w.txid >= ${cursor.xmax}::xid8)
        and w.status in ('pending', 'retrying') and w.lane_partition = any (${PARTITIONS}::smallint[])
    ),
    found as (
      (select w.* from webhook_notifications w
        where w.seq > ${cursor.afterSeq}::bigint and w.status in ('pending', 'retrying')
          and w.lane_partition = any (${PARTITIONS}::smallint[])
        order by w.seq limit ${limit}::int)
      union all
      (select * from late where seq <= ${cursor.afterSeq}::bigint order by seq limit ${limit}::int)
    )
    select s.snap, r.* from s left join lateral (
      select n.notification_id, n.seq::float8 as seq, n.payload::text as body from found n order by n.seq limit ${limit}::int
    ) r on true`.execute(db);
  return cursorAfter(rows, cursor, limit);
}

/** readAfter of migration 0031 to 0032, as it was: planned on the statistics as they are. */
async function readAfterBefore0032(db: Db, cursor: ReadCursor, limit: number) {
  const { rows } = await sql<{ snap: string; seq: number | null }>`
    with s as materialized (select pg_current_snapshot()::text as snap),
    late as materialized (
      ${
        cursor.openXids.length > 0
          ? sql`select w.* from webhook_notifications w
              where w.txid = any (${cursor.openXids}::xid8[])
                and w.status in ('pending', 'retrying') and w.lane_partition = any (${PARTITIONS}::smallint[])
              union all`
          : sql``
      }
      select w.* from webhook_notifications w
      where w.txid >= ${cursor.xmax}::xid8
        and w.status in ('pending', 'retrying') and w.lane_partition = any (${PARTITIONS}::smallint[])
    ),
    found as (
      (select w.* from webhook_notifications w
        where w.seq > ${cursor.afterSeq}::bigint and w.seq > 0 and w.status in ('pending', 'retrying')
          and w.lane_partition = any (${PARTITIONS}::smallint[])
        order by w.seq limit ${limit}::int)
      union all
      (select * from late where seq <= ${cursor.afterSeq}::bigint order by seq limit ${limit}::int)
    )
    select s.snap, r.* from s left join lateral (
      select n.notification_id, n.seq::float8 as seq, n.payload::text as body from found n order by n.seq limit ${limit}::int
    ) r on true`.execute(db);
  return cursorAfter(rows, cursor, limit);
}

/**
 * readAfter of migration 0032 to 0033: 0032's function, created in the bench's database under another name from the
 * migration's own text. On no statistics and a grown table it read the late commits through the partition index, the
 * whole backlog at every read (session 30, none, 40,000: 263-336 against 7.0-7.5 µs a notification in the second and
 * third rounds).
 */
const BEFORE_0033 = 'webhook_read_after_before_0033';
async function createBefore0033(db: Db): Promise<void> {
  const migration = readFileSync(
    new URL('../src/store/migrations/0032_webhook_read_after.sql', import.meta.url),
    'utf8',
  );
  const create = migration.slice(migration.indexOf('create function webhook_read_after('));
  await sql
    .raw(create.replace('create function webhook_read_after(', `create function ${BEFORE_0033}(`))
    .execute(db);
}

async function readAfterBefore0033(db: Db, cursor: ReadCursor, limit: number) {
  const { rows } = await sql<{ snap: string; top: number | null; seq: number | null }>`
    select snap, top, seq from ${sql.raw(BEFORE_0033)}(${PARTITIONS}::smallint[], ${cursor.afterSeq}::bigint,
      ${cursor.openXids}::xid8[], ${cursor.xmax}::xid8, ${limit}::int)`.execute(db);
  return cursorAfter(rows, cursor, limit);
}

/**
 * The count read and the cursor past it, as readAfter makes it (the reads before 0032 carry no `top`: their cursor
 * stayed at the last one read).
 */
function cursorAfter(
  rows: Array<{ snap: string; top?: number | null; seq: number | null }>,
  cursor: ReadCursor,
  limit: number,
) {
  const found = rows.filter((row): row is typeof row & { seq: number } => row.seq !== null);
  return { count: found.length, cursor: cursorAfterRead(rows[0]!, found, cursor, limit) };
}

type Read = (db: Db, cursor: ReadCursor) => Promise<{ count: number; cursor: ReadCursor }>;
const READS: Record<'before 0031' | 'before 0032' | 'before 0033' | 'now', Read> = {
  'before 0031': (db, cursor) => readAfterBefore0031(db, cursor, READ_LIMIT),
  'before 0032': (db, cursor) => readAfterBefore0032(db, cursor, READ_LIMIT),
  'before 0033': (db, cursor) => readAfterBefore0033(db, cursor, READ_LIMIT),
  now: async (db, cursor) => {
    const read = await readAfter(db, PARTITIONS, cursor, READ_LIMIT);
    return { count: read.rows.length, cursor: read.cursor };
  },
};

/** Reads backlogs through with each read under `stats`, in a database of their own; prints the ratios. */
async function measure(stats: 'quiet' | 'none'): Promise<void> {
  const database = await createTestDatabase();
  // One connection: the reads' backend is the one measured.
  const store = createStore(database.url, { max: 1 });
  const db = store.db;
  const { rows } = await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(db);
  const backendCpuMs = () => procStatCpuMs(`/proc/${rows[0]!.pid}/stat`);
  try {
    await sql`insert into platforms (platform_code, name) values (${BENCH_PLATFORM}, 'bench')`.execute(db);
    await createBefore0033(db);
    /** Records `size` undelivered notifications in one transaction, resources `trade:<tag>-<i>`. */
    const record = (size: number, tag: string) =>
      sql`insert into webhook_notifications (notification_id, platform_code, payload_type, resource_key, payload)
        select gen_random_uuid(), ${BENCH_PLATFORM}, 'trade_status_changed', 'trade:' || ${tag} || '-' || i, ${JSON.stringify(BENCH_TRADE_PAYLOAD)}::jsonb
        from generate_series(1, ${size}::int) i`.execute(db);
    if (stats === 'quiet') {
      await record(20000, 'old');
      await sql`update webhook_notifications set status = 'delivered', delivered_at = now()`.execute(db);
      await sql`vacuum analyze webhook_notifications`.execute(db);
    } else {
      await sql`alter table webhook_notifications set (autovacuum_enabled = off)`.execute(db);
    }

    /** Reads a backlog of `size` through with `read`: the backend's CPU per notification, in µs. */
    const readThrough = async (read: Read, size: number, tag: string): Promise<number> => {
      let { cursor } = await loadPartitions(db, PARTITIONS, 40);
      await record(size, tag);
      const before = backendCpuMs();
      let total = 0;
      for (;;) {
        const next = await read(db, cursor);
        total += next.count;
        cursor = next.cursor;
        if (next.count < READ_LIMIT) break;
      }
      const cpuUs = ((backendCpuMs() - before) * 1000) / total;
      if (total !== size) throw new Error(`read ${total} of a backlog of ${size}`);
      // Delivered, as a worker leaves them; the statistics stay as they were.
      await sql`update webhook_notifications set status = 'delivered', delivered_at = now() where status = 'pending'`.execute(
        db,
      );
      return cpuUs;
    };

    console.log(`statistics ${stats}: PostgreSQL's CPU per notification read, ${ROUNDS} rounds`);
    for (const size of BACKLOGS) {
      const ratios = {
        'before 0031': [] as number[],
        'before 0032': [] as number[],
        'before 0033': [] as number[],
      };
      for (let round = 0; round < ROUNDS; round++) {
        const old31 = await readThrough(READS['before 0031'], size, `b31-${size}-${round}`);
        const old32 = await readThrough(READS['before 0032'], size, `b32-${size}-${round}`);
        const old33 = await readThrough(READS['before 0033'], size, `b33-${size}-${round}`);
        const now = await readThrough(READS.now, size, `now-${size}-${round}`);
        ratios['before 0031'].push(old31 / now);
        ratios['before 0032'].push(old32 / now);
        ratios['before 0033'].push(old33 / now);
        console.log(
          `  backlog ${size}, round ${round + 1}: before 0031 ${old31.toFixed(1)} µs, before 0032 ${old32.toFixed(1)} µs, before 0033 ${old33.toFixed(1)} µs, now ${now.toFixed(1)} µs`,
        );
      }
      for (const [read, list] of Object.entries(ratios))
        console.log(
          `statistics ${stats}, backlog ${size}: ${read} / now = ${median(list).toFixed(1)} (median of ${ROUNDS}; rounds ${list.map((r) => r.toFixed(1)).join(', ')})`,
        );
    }
  } finally {
    await store.close();
    await database.drop();
  }
}

for (const stats of STATS) await measure(stats);
