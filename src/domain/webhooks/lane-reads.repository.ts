import { sql } from 'kysely';
import type { Executor } from '../../store/database.ts';
import type { BookRow, RefillWanted } from './lane-book.ts';
import type { Lane } from './delivery-lane.ts';

/**
 * The reads of the delivery redesign (lane-book.ts): a worker that holds partitions of the lanes finds their
 * undelivered notifications with reads, a few hundred a statement, rather than by claiming lane rows. Three reads:
 * a partition's whole backlog when the worker takes it (`loadPartitions`), what was recorded since (`readAfter`,
 * after a cursor), and the next part of a lane the book held only the start of (`readLanes`). Each is one round
 * trip; none writes.
 */

/** An undelivered notification as the reads bring it: what the book orders by, and what an attempt sends. */
export interface ReadNotification extends BookRow {
  payload_type: string;
  /**
   * The payload as PostgreSQL writes its jsonb out: the delivery's body as it is, rather than parsed here and written
   * out again (about 2 µs of the worker's CPU a delivery, bench/webhooks.bench.ts).
   */
  body: string;
  round_attempts: number;
  attempt_count: number;
  /** Epoch ms when its current round began: its commit, or the operator's latest redelivery (migration 0012). */
  round_started_ms: number;
}

/**
 * Where a worker's reads stand: each undelivered notification of its partitions that the last read's snapshot
 * showed, up to `afterSeq`, has been read. A notification's seq is drawn as it is recorded, not as it commits, so one
 * whose transaction commits after a later one was read has a seq below the cursor: the next read finds it by its
 * transaction (migration 0026's txid), one of those open at that snapshot (`openXids`) or begun after it (at or
 * after `xmax`). An operator's redelivery gives the notification a new txid, so it is found the same way.
 */
export interface ReadCursor {
  afterSeq: number;
  openXids: string[];
  xmax: string;
}

/**
 * The columns of a ReadNotification, of `webhook_notifications n`, in the types it has. The times in float8 from the
 * start (date_part), not numeric (extract, since PostgreSQL 14): numeric arithmetic on every row read was an eighth
 * of a read's CPU (500 rows: 6.0 against 5.25 ms of the backend's CPU, session 23). Migration 0032's read function
 * returns the same columns, written out there.
 */
const READ_COLUMNS = sql`n.notification_id, n.seq::float8 as seq, n.lane_partition::int as lane_partition,
  n.platform_code, n.resource_key, n.payload_type, n.payload::text as body, n.state_token, n.round_attempts, n.attempt_count,
  greatest(0, ceil(date_part('epoch', n.next_attempt_at - clock_timestamp()) * 1000)) as wait_ms,
  date_part('epoch', coalesce(n.redelivered_at, n.created_at)) * 1000 as round_started_ms`;

/** A pg_snapshot's text (`xmin:xmax:xip,…`) as a cursor after `afterSeq`. */
function cursorOf(snapshot: string, afterSeq: number): ReadCursor {
  const [, xmax, xip] = snapshot.split(':') as [string, string, string];
  return { afterSeq, openXids: xip === '' ? [] : xip.split(','), xmax };
}

/**
 * Every undelivered notification of `partitions`, up to `perLane` of each lane (the first, by seq; the book asks
 * for the rest when it has worked through them), in seq order, with a cursor from which `readAfter` goes on:
 * after the highest seq the snapshot showed, with the transactions it did not.
 */
export async function loadPartitions(
  db: Executor,
  partitions: readonly number[],
  perLane: number,
): Promise<{ rows: ReadNotification[]; cursor: ReadCursor }> {
  const { rows } = await sql<ReadNotification & { snap: string; top: number | null }>`
    with s as materialized (
      select pg_current_snapshot()::text as snap, (select max(seq) from webhook_notifications)::float8 as top
    )
    select s.snap, s.top, r.* from s left join lateral (
      select ${READ_COLUMNS}
      from (
        select w.*, row_number() over (partition by w.platform_code, w.resource_key order by w.seq) as place
        from webhook_notifications w
        where w.lane_partition = any (${partitions}::smallint[]) and w.status in ('pending', 'retrying')
      ) n
      where n.place <= ${perLane}::int
      order by n.seq
    ) r on true`.execute(db);
  const first = rows[0]!;
  return {
    rows: rows.filter((row) => row.notification_id !== null),
    cursor: cursorOf(first.snap, first.top ?? 0),
  };
}

/**
 * Up to `limit` undelivered notifications of `partitions` that `cursor` has not seen, in seq order, and the cursor
 * past them. Two index reads that do not overlap: those after the cursor's seq, in seq order and at most `limit`
 * (migration 0031's seq index of the undelivered, from the cursor on), and those below it of the transactions the
 * cursor's snapshot did not show (0026's txid index, a range for those begun since and the open ones by equality).
 * Each reads what it brings whatever the statistics say: the read is migration 0032's function, planned without
 * sorts and with the cursor's values at each call, since on some statistics (none: a new database) the planner read a
 * partial index of the undelivered whole and sorted it at each read, so that reading a backlog cost the square of its
 * length (test/integration/webhook-read-plans.test.ts).
 */
export async function readAfter(
  db: Executor,
  partitions: readonly number[],
  cursor: ReadCursor,
  limit: number,
): Promise<{ rows: ReadNotification[]; cursor: ReadCursor }> {
  const { rows } = await sql<ReadNotification & { snap: string; top: number | null }>`
    select * from webhook_read_after(${partitions}::smallint[], ${cursor.afterSeq}::bigint,
      ${cursor.openXids}::xid8[], ${cursor.xmax}::xid8, ${limit}::int)`.execute(db);
  const found = rows.filter((row) => row.notification_id !== null);
  return { rows: found, cursor: cursorAfterRead(rows[0]!, found, cursor, limit) };
}

/**
 * The cursor past a read after `cursor` that found `found` (in seq order, at most `limit`), with the snapshot (and
 * the highest seq it showed, `top`) its answer's first row carries. Cut at `limit`: what follows the last one read is
 * for the next read (seq order: nothing at or below it is left out). Otherwise every notification of the partitions
 * that the snapshot showed has been read, up to `top`: the cursor moves there, past the other partitions'
 * notifications too, which the next read would otherwise walk over again (0032). Those below it the snapshot did not
 * show are the late branch's. (Exported for bench/webhook-reads.bench.ts, whose earlier reads move on the same way.)
 */
export function cursorAfterRead(
  first: { snap: string; top?: number | null },
  found: ReadonlyArray<{ seq: number }>,
  cursor: ReadCursor,
  limit: number,
): ReadCursor {
  const last = found.at(-1)?.seq ?? cursor.afterSeq;
  const afterSeq = found.length >= limit ? last : Math.max(cursor.afterSeq, last, first.top ?? 0);
  return cursorOf(first.snap, afterSeq);
}

/**
 * The next undelivered notifications of each lane after its `afterSeq`, up to `perLane` each, in seq order; whether
 * that is all of each lane's (`complete`), by the lane's key.
 */
export async function readLanes(
  db: Executor,
  wanted: readonly RefillWanted[],
  perLane: number,
): Promise<Array<{ lane: Lane; afterSeq: number; rows: ReadNotification[]; complete: boolean }>> {
  const { rows } = await sql<ReadNotification & { place: number }>`
    select w.place::int as place, n.*
    from unnest(${wanted.map((w) => w.lane.platformCode)}::text[], ${wanted.map((w) => w.lane.resourceKey)}::text[],
      ${wanted.map((w) => w.afterSeq)}::bigint[]) with ordinality as w(platform_code, resource_key, after_seq, place)
    cross join lateral (
      select ${READ_COLUMNS} from webhook_notifications n
      -- In the undelivered index's collation (0011), the one index that fits, whatever the statistics say.
      where n.platform_code collate "C" = w.platform_code and n.resource_key collate "C" = w.resource_key
        and n.status in ('pending', 'retrying') and n.seq > w.after_seq
      order by n.seq
      limit ${perLane}::int
    ) n
    order by w.place, n.seq`.execute(db);
  const answers = wanted.map(({ lane, afterSeq }) => ({
    lane,
    afterSeq,
    rows: [] as ReadNotification[],
    complete: true,
  }));
  for (const { place, ...row } of rows) answers[place - 1]!.rows.push(row);
  for (const answer of answers) answer.complete = answer.rows.length < perLane;
  return answers;
}
