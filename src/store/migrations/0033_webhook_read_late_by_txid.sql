-- The late commits of 0032's read (those below the cursor, of transactions the cursor's snapshot did not show) are read
-- in txid order. They were to come through the txid index of the undelivered (0026), a few rows a read; but where the
-- statistics make every partial index of the undelivered look alike (none taken, or taken while nothing was pending),
-- the planner could read them through the partition index instead, which holds every undelivered notification of the
-- worker's partitions, dead entries included: the whole backlog at every read (bench/webhook-reads.bench.ts on no
-- statistics, once the rounds' delivered backlogs, never vacuumed, had grown the table to some 360,000: 263-336 against
-- 7.0-7.5 µs a notification read). Making the partition condition one that index cannot take (`lane_partition + 0`,
-- session 29) was not enough: CI's run of the quiet-statistics read test then scanned 20,011 rows for a backlog of
-- 5,000, most likely through another partial index of the undelivered, all of which look alike to the planner there.
-- With sorts ruled out (0032's `enable_sort = off`, which makes a sort cost more than any scan), an order by txid
-- leaves one way that costs what it reads: the txid index, the only one in txid order, from the bound or at the open
-- transactions' txids. (A branch the planner knows to be empty, no open transactions, still shows a sort of nothing.)
--
-- Nothing else changes but where the late branch leaves out those above the cursor (in its scans rather than after
-- them) and that the read is not planned in parallel (below).
create or replace function webhook_read_after(
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
-- Nor in parallel (0033): the txid order made the late commits' two reads a parallel append, whose workers took
-- 8 ms to start for a read of 0.3 ms.
set max_parallel_workers_per_gather = 0
as $$
#variable_conflict use_column
begin
  return query
  with s as materialized (
    select pg_current_snapshot()::text as snap, (select max(w.seq) from webhook_notifications w)::float8 as top
  ),
  late as materialized (
    -- In txid order (0033): with sorts ruled out, the txid index is the way to it, whatever the statistics. Those above
    -- the cursor are left out here, not after: the first read of a backlog committed after the cursor finds all of
    -- it by its txid, and kept it whole in the CTE only to leave it out (the seq index brings them, in order).
    (select w.* from webhook_notifications w
      where cardinality(p_open_xids) > 0 and w.txid = any (p_open_xids)
        and w.status in ('pending', 'retrying') and w.lane_partition = any (p_partitions)
        and w.seq <= p_after_seq
      order by w.txid)
    union all
    (select w.* from webhook_notifications w
      where w.txid >= p_xmax
        and w.status in ('pending', 'retrying') and w.lane_partition = any (p_partitions)
        and w.seq <= p_after_seq
      order by w.txid)
  ),
  found as (
    -- w.seq > 0 (always so) is the condition of 0031's index.
    (select w.* from webhook_notifications w
      where w.seq > p_after_seq and w.seq > 0 and w.status in ('pending', 'retrying')
        and w.lane_partition = any (p_partitions)
      order by w.seq limit p_limit)
    union all
    (select l.* from late l order by l.seq limit p_limit)
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
