/**
 * What a worker's reads of a backlog cost PostgreSQL (lane-reads.repository.ts readAfter, migration 0031): the
 * service's read against the read as it was before 0031 (copied below), on the same database, backlogs and
 * statistics, taking turns. The statistics are taken while nothing is pending, as after any quiet hour: every partial
 * index of the undelivered then looks empty to the planner. The read before 0031 then went through one of them whole
 * at each read, so that reading a backlog through cost the square of its length.
 *
 * Measured: CPU time of the one backend that runs the reads (/proc), per notification read, for backlogs of each
 * size in BENCH_BACKLOGS (10000,40000), BENCH_ROUNDS rounds (3); the result is the median ratio before/now.
 *
 *   DATABASE_URL=postgres://postgres@127.0.0.1:5432/postgres node --import tsx bench/webhook-reads.bench.ts
 *
 * Session 28: 16-25 µs against 6 at 10,000; 49-76 against 7 at 40,000.
 */
import { sql } from 'kysely';
import { BENCH_PLATFORM, BENCH_TRADE_PAYLOAD, median, procStatCpuMs } from './bench-support.ts';
import { loadPartitions, readAfter, type ReadCursor } from '../src/domain/webhooks/lane-reads.repository.ts';
import { createStore, type Db } from '../src/store/database.ts';
import { createTestDatabase } from '../test/helpers/database.ts';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 3);
const BACKLOGS = (process.env.BENCH_BACKLOGS ?? '10000,40000').split(',').map(Number);
/** The worker's READ_LIMIT (book-reads.ts). */
const READ_LIMIT = 500;
const PARTITIONS = Array.from({ length: 64 }, (_, i) => i);

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
  const found = rows.filter((row) => row.seq !== null);
  const last = found.at(-1)?.seq ?? cursor.afterSeq;
  const [, xmax, xip] = rows[0]!.snap.split(':') as [string, string, string];
  return {
    count: found.length,
    cursor: {
      afterSeq: found.length >= limit ? last : Math.max(cursor.afterSeq, last),
      openXids: xip === '' ? [] : xip.split(','),
      xmax,
    },
  };
}

type Read = (db: Db, cursor: ReadCursor) => Promise<{ count: number; cursor: ReadCursor }>;
const READS: Record<'before 0031' | 'now', Read> = {
  'before 0031': (db, cursor) => readAfterBefore0031(db, cursor, READ_LIMIT),
  now: async (db, cursor) => {
    const read = await readAfter(db, PARTITIONS, cursor, READ_LIMIT);
    return { count: read.rows.length, cursor: read.cursor };
  },
};

async function main(): Promise<void> {
  const database = await createTestDatabase();
  // One connection: the reads' backend is the one measured.
  const store = createStore(database.url, { max: 1 });
  const db = store.db;
  const { rows } = await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(db);
  const backendCpuMs = () => procStatCpuMs(`/proc/${rows[0]!.pid}/stat`);
  try {
    await sql`insert into platforms (platform_code, name) values (${BENCH_PLATFORM}, 'bench')`.execute(db);
    await sql`insert into webhook_notifications (notification_id, platform_code, payload_type, resource_key, payload)
      select gen_random_uuid(), ${BENCH_PLATFORM}, 'trade_status_changed', 'trade:old-' || i, ${JSON.stringify(BENCH_TRADE_PAYLOAD)}::jsonb
      from generate_series(1, 20000) i`.execute(db);
    await sql`update webhook_notifications set status = 'delivered', delivered_at = now()`.execute(db);
    await sql`vacuum analyze webhook_notifications`.execute(db);

    /** Reads a backlog of `size` through with `read`: the backend's CPU per notification, in µs. */
    const readThrough = async (read: Read, size: number, tag: string): Promise<number> => {
      let { cursor } = await loadPartitions(db, PARTITIONS, 40);
      await sql`insert into webhook_notifications (notification_id, platform_code, payload_type, resource_key, payload)
        select gen_random_uuid(), ${BENCH_PLATFORM}, 'trade_status_changed', 'trade:' || ${tag} || '-' || i, ${JSON.stringify(BENCH_TRADE_PAYLOAD)}::jsonb
        from generate_series(1, ${size}::int) i`.execute(db);
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
      // Delivered, as a worker leaves them; the statistics stay those of the quiet table.
      await sql`update webhook_notifications set status = 'delivered', delivered_at = now() where status = 'pending'`.execute(
        db,
      );
      return cpuUs;
    };

    console.log(`webhook reads of a backlog: PostgreSQL's CPU per notification read, ${ROUNDS} rounds`);
    for (const size of BACKLOGS) {
      const ratios: number[] = [];
      for (let round = 0; round < ROUNDS; round++) {
        const old = await readThrough(READS['before 0031'], size, `old-${size}-${round}`);
        const now = await readThrough(READS.now, size, `now-${size}-${round}`);
        ratios.push(old / now);
        console.log(
          `  backlog ${size}, round ${round + 1}: before 0031 ${old.toFixed(1)} µs, now ${now.toFixed(1)} µs`,
        );
      }
      console.log(
        `backlog ${size}: before 0031 / now = ${median(ratios).toFixed(1)} (median of ${ROUNDS}; rounds ${ratios.map((r) => r.toFixed(1)).join(', ')})`,
      );
    }
  } finally {
    await store.close();
    await database.drop();
  }
}

await main();
