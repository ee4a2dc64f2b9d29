-- A worker's read after its cursor (lane-reads.repository.ts readAfter) as a function, so that it can be planned with
-- sorts ruled out. 0031 gave the read an index of the undelivered in seq order, from which the next few hundred after
-- the cursor come in order and no further; but the planner chose it only on some statistics. On none (a new database,
-- or a table autovacuum had not analysed yet) it read the partition index of the undelivered whole and sorted it, at
-- every read: reading a backlog of 60,000 cost PostgreSQL 27 µs a notification, as much as recording its delivery,
-- and the square of the backlog's length in all (bench/webhook-reads.bench.ts, test/integration/
-- webhook-read-plans.test.ts). Without sorts, the only way to the first `p_limit` after the cursor in seq order is
-- that index, read in order, whatever the statistics.
--
-- Its answer also carries the highest seq the snapshot shows (`top`), as a partition's load does: a read that finds
-- fewer than `p_limit` has read every undelivered notification of its partitions the snapshot shows, so the cursor
-- moves there rather than to the last of its own. Without sorts the seq index is read from the cursor over every
-- partition's undelivered notifications, the others' filtered out, and a worker holding a few partitions read the
-- others' backlog again at every read while its own were quiet (review).
--
-- The late commits (those below the cursor, of transactions the cursor's snapshot did not show) are read as before,
-- through the txid index, into a CTE of their own: a range for the transactions begun since, and the open ones by
-- equality only when there are any (each an index bound of its own; joined by OR, neither was).
create function webhook_read_after(
  p_partitions smallint[], p_after_seq bigint, p_open_xids xid8[], p_xmax xid8, p_limit integer
)
returns table (
  snap text, top double precision, notification_id uuid, seq double precision, lane_partition integer, platform_code text,
  resource_key text, payload_type text, body text, state_token uuid, round_attempts integer, attempt_count integer,
  wait_ms double precision, round_started_ms double precision
)
-- Stable: a read (PL/pgSQL refuses a write in it, and database.ts lists only volatile functions as writing), with the
-- calling statement's snapshot, the one pg_current_snapshot() gives the cursor.
language plpgsql stable
set enable_sort = off
-- Planned at each call with the cursor's values, as the statement it replaces was: a plan kept for any cursor (the
-- generic plan PL/pgSQL takes after five calls) cannot tell a txid bound that leaves a few rows from one that leaves
-- all, and read the late commits through the partition index, the whole backlog at each read (bench).
set plan_cache_mode = force_custom_plan
set jit = off
as $$
#variable_conflict use_column
begin
  return query
  with s as materialized (
    select pg_current_snapshot()::text as snap, (select max(w.seq) from webhook_notifications w)::float8 as top
  ),
  late as materialized (
    select w.* from webhook_notifications w
    where cardinality(p_open_xids) > 0 and w.txid = any (p_open_xids)
      and w.status in ('pending', 'retrying') and w.lane_partition = any (p_partitions)
    union all
    select w.* from webhook_notifications w
    where w.txid >= p_xmax
      and w.status in ('pending', 'retrying') and w.lane_partition = any (p_partitions)
  ),
  found as (
    -- w.seq > 0 (always so) is the condition of 0031's index.
    (select w.* from webhook_notifications w
      where w.seq > p_after_seq and w.seq > 0 and w.status in ('pending', 'retrying')
        and w.lane_partition = any (p_partitions)
      order by w.seq limit p_limit)
    union all
    (select l.* from late l where l.seq <= p_after_seq order by l.seq limit p_limit)
  )
  -- One row at least, with the snapshot: a read that finds nothing still moves the cursor.
  select s.snap, s.top, r.* from s left join lateral (
    select n.notification_id, n.seq::float8, n.lane_partition::int, n.platform_code, n.resource_key, n.payload_type,
      n.payload::text, n.state_token, n.round_attempts, n.attempt_count,
      greatest(0, ceil(date_part('epoch', n.next_attempt_at - clock_timestamp()) * 1000)),
      date_part('epoch', coalesce(n.redelivered_at, n.created_at)) * 1000
    from found n order by n.seq limit p_limit
  ) r on true;
end;
$$;
