-- What the delivery redesign's reads need of each notification (README, Webhooks, "Where this leaves issue 4's
-- goals"; src/domain/webhooks/lane-book.ts and lane-reads.repository.ts): workers are to lease partitions of the
-- lanes and find their work with reads after a cursor, rather than claim rows of webhook_lanes, whose bookkeeping is
-- most of PostgreSQL's share of a delivery (bench/webhook-store-costs.bench.ts).
--
-- - lane_partition: the lane's partition, one of 64, from a hash of the platform and the resource key. md5 rather
--   than hashtext: a stored value must not move with PostgreSQL's version (hashtext's is not promised), or the
--   notifications of one lane recorded before and after an upgrade would fall in two partitions, two workers.
-- - txid: the transaction that recorded the notification, or the operator's latest redelivery of it
--   (webhooks.repository.ts redeliver): a read after a cursor finds by it what committed after a later
--   notification had been read (the transactions open at the last read, from its snapshot).
--
-- Both are indexed over the undelivered notifications only, as the reads ask. Adding them rewrites the table (the
-- generated column, and the default evaluated per row): on a large table, migrate in a quiet hour.

create function webhook_lane_partition(p_platform text, p_resource text) returns smallint
language sql immutable parallel safe
return (('x' || substr(md5(p_platform || ':' || p_resource), 1, 4))::bit(16)::integer % 64)::smallint;

alter table webhook_notifications
  add column lane_partition smallint not null
    generated always as (webhook_lane_partition(platform_code, resource_key)) stored,
  add column txid xid8 not null default pg_current_xact_id();

create index webhook_notifications_open_partition
  on webhook_notifications (lane_partition, seq) where status in ('pending', 'retrying');
create index webhook_notifications_open_txid
  on webhook_notifications (txid) where status in ('pending', 'retrying');

-- The partitions' leases: a worker holds a partition's lanes (works them, reads their notifications) while its
-- lease runs; a lease lasts the request timeout + 5 s + a slack and is renewed every second
-- (webhook_lease_partitions), so that an attempt started under it has at least the request timeout + 5 s
-- (issue 4 point 5). A worker that dies leaves its partitions to any other once their leases run out.
create table webhook_partitions (
  lane_partition smallint primary key,
  owner text,
  lease_until timestamptz
);
insert into webhook_partitions (lane_partition) select g from generate_series(0, 63) g;

-- The workers that hold or want partitions, each seen at its last renewal: a fair share is the partitions over
-- those wanting (a worker whose every slot is held by hanging receivers wants none until a slot frees).
create table webhook_partition_owners (
  owner text primary key,
  seen_until timestamptz not null,
  wanting boolean not null
);

-- One worker's renewal, once a second: gives back p_give_back, renews the rest of its leases, and, if it wants
-- partitions, takes free ones (never held, given back, or expired) up to a fair share, or all that are free while
-- no other worker is short of its share. Returns one row: the partitions it holds, its fair share (the partitions
-- over the workers wanting, rounded down), and whether another worker is short of that, so that one over it gives
-- some back (those none of whose lanes it is working; the worker chooses them, and they go in its next renewal).
create function webhook_lease_partitions(p_owner text, p_lease_ms integer, p_give_back smallint[], p_wanting boolean)
returns table (partitions smallint[], fair_share integer, others_short boolean)
language plpgsql volatile as $$
declare
  v_now timestamptz := clock_timestamp();
  v_until timestamptz := clock_timestamp() + p_lease_ms * interval '1 millisecond';
  v_wanting integer;
  v_share integer;
  v_held integer;
  v_short boolean;
  v_take integer;
begin
  insert into webhook_partition_owners as o (owner, seen_until, wanting) values (p_owner, v_until, p_wanting)
  on conflict (owner) do update set seen_until = excluded.seen_until, wanting = excluded.wanting;
  delete from webhook_partition_owners o where o.seen_until < v_now - interval '1 hour';

  update webhook_partitions p set owner = null, lease_until = null
  where p.owner = p_owner and p.lane_partition = any (p_give_back);
  update webhook_partitions p set lease_until = v_until where p.owner = p_owner;
  get diagnostics v_held = row_count;

  select count(*) into v_wanting from webhook_partition_owners o where o.seen_until > v_now and o.wanting;
  v_share := 64 / greatest(v_wanting, 1);
  select exists (
    select 1 from webhook_partition_owners o
    where o.seen_until > v_now and o.wanting and o.owner <> p_owner
      and (select count(*) from webhook_partitions p where p.owner = o.owner and p.lease_until > v_now) < v_share
  ) into v_short;

  if p_wanting then
    -- Up to the share (rounded up, so that the shares cover every partition), or every free one while no other
    -- worker is short.
    v_take := case when v_short then greatest(0, ceil(64.0 / greatest(v_wanting, 1))::integer - v_held) else 64 end;
    update webhook_partitions p set owner = p_owner, lease_until = v_until
    where p.lane_partition = any (array(
      select f.lane_partition from webhook_partitions f
      where (f.owner is null or f.lease_until < v_now) and not (f.lane_partition = any (p_give_back))
      order by f.lane_partition
      limit v_take
      for update skip locked));
  end if;

  return query
  select array(select p.lane_partition from webhook_partitions p where p.owner = p_owner order by 1),
    v_share, v_short;
end;
$$;

-- A worker's attempts' records (what webhook_settle_lanes did before, without lanes): each attempt is recorded
-- on its notification's row, since the request was made; the notification's state changes only if its state token
-- is still the one the attempt started from (an operator's redelivery may have come first) and the worker still
-- holds the partition: one whose lease ran out while its record was on its way must not move on a notification
-- that the partition's new holder has read as it was (it would wait for a retry it does not know of, and the next
-- one of its resource go first: review). The partitions held are locked (FOR SHARE) until the record commits, so
-- that no other worker takes one meanwhile (its claim skips locked rows). Each item is answered with whether its
-- state change applied, and whether the worker holds its partition (else it stops working it).
create type webhook_record_item as (
  idx integer, lane_partition smallint, id uuid, token uuid, new_token uuid, attempted boolean,
  started_at_ms bigint, duration_ms integer, status_code integer, error text, outcome text, status text,
  reason text, round_attempts integer, delay_ms integer
);

create function webhook_record_attempts(p_owner text, p_items jsonb)
returns table (idx integer, lease_held boolean, applied boolean)
language plpgsql volatile
-- As the settle before it (0009, 0025): one plan kept, every row found through its key. Without JIT: the read of
-- the partitions held (64 rows, read whole) costs 10^10 with seqscans off, past jit_above_cost, and compiling it
-- took 72 ms a call (bench/webhook-store-costs.bench.ts: 400 µs of PostgreSQL's CPU a delivery, 25 without).
set plan_cache_mode = force_generic_plan
set enable_seqscan = off
set jit = off
as $$
#variable_conflict use_column
declare
  v_items webhook_record_item[];
  v_ids uuid[];
  v_held smallint[];
  v_upd_idx integer[];
  v_upd_applied boolean[];
begin
  select array_agg(x), array_agg(x.id) into v_items, v_ids
  from jsonb_populate_recordset(null::webhook_record_item, p_items) x;
  v_held := array(select p.lane_partition from webhook_partitions p where p.owner = p_owner for share);

  -- The records, then each item's answer from arrays (0025: joined to the update's output, the records were read
  -- once per item). A notification whose token is already the item's new one has its record (a statement sent
  -- again after its answer was lost): left as it is, answered as applied.
  with updated as (
    update webhook_notifications n set
      attempt_count = n.attempt_count + case when i.attempted then 1 else 0 end,
      earlier_attempts = case when i.attempted and n.last_attempt_outcome is not null
        then coalesce(n.earlier_attempts, '[]'::jsonb) || jsonb_build_array(jsonb_build_object(
          'attempt_number', n.attempt_count, 'started_at', n.last_attempt_at,
          'duration_ms', n.last_attempt_duration_ms, 'status_code', n.last_attempt_status_code,
          'error', n.last_attempt_error, 'outcome', n.last_attempt_outcome, 'worker', n.last_attempt_worker))
        else n.earlier_attempts end,
      last_attempt_at = case when i.attempted then to_timestamp(i.started_at_ms / 1000.0) else n.last_attempt_at end,
      last_attempt_duration_ms = case when i.attempted then i.duration_ms else n.last_attempt_duration_ms end,
      last_attempt_status_code = case when i.attempted then i.status_code else n.last_attempt_status_code end,
      last_attempt_error = case when i.attempted then i.error else n.last_attempt_error end,
      last_attempt_outcome = case when i.attempted then i.outcome else n.last_attempt_outcome end,
      last_attempt_worker = case when i.attempted then p_owner else n.last_attempt_worker end,
      status = case when n.state_token = i.live_token then i.status else n.status end,
      status_reason = case when n.state_token = i.live_token then i.reason else n.status_reason end,
      round_attempts = case when n.state_token = i.live_token then i.round_attempts else n.round_attempts end,
      next_attempt_at = case when n.state_token = i.live_token and i.delay_ms is not null
        then clock_timestamp() + i.delay_ms * interval '1 millisecond' else n.next_attempt_at end,
      delivered_at = case when n.state_token = i.live_token and i.status = 'delivered'
        then clock_timestamp() else n.delivered_at end,
      dead_at = case when n.state_token = i.live_token and i.status = 'dead' then clock_timestamp() else n.dead_at end,
      skipped_at = case when n.state_token = i.live_token and i.status = 'skipped'
        then clock_timestamp() else n.skipped_at end,
      state_token = case when n.state_token = i.live_token then i.new_token else n.state_token end
    -- The token to move on from: none where the partition is not held (the attempt is recorded, nothing else).
    from (select u.*, case when u.lane_partition = any (v_held) then u.token end as live_token
      from unnest(v_items) u) i
    where n.notification_id = any (v_ids) and n.notification_id = i.id and n.state_token <> i.new_token
    returning i.idx, n.state_token = i.new_token as applied
  )
  select coalesce(array_agg(u.idx), '{}'), coalesce(array_agg(u.applied), '{}')
  into v_upd_idx, v_upd_applied
  from updated u;

  return query
  select i.idx, i.lane_partition = any (v_held), coalesce(v_upd_applied[array_position(v_upd_idx, i.idx)],
    -- Not updated: recorded already (above), or gone (purged).
    exists (select 1 from webhook_notifications w where w.notification_id = i.id and w.state_token = i.new_token))
  from unnest(v_items) i;
end;
$$;

-- The lanes' table and functions are replaced by the above. webhook_wake_lane stays, a NOTIFY only, for the
-- instances of the previous version that record notifications during a rolling deploy (their workers find no
-- lanes to claim, and stop with their version); a later migration drops it.
drop function webhook_claim_lanes(text, integer, integer, integer);
drop function webhook_claim_lanes(text, integer, integer, integer, text[], integer);
drop function webhook_settle_lanes(text, integer, jsonb);
drop function webhook_release_lanes(text[], text[], text);
drop function webhook_lane_platforms();
drop type webhook_settle_item;
drop table webhook_lanes;
create or replace function webhook_wake_lane(p_platform text, p_resource text) returns void
language sql volatile as $$ select pg_notify('svc_webhooks', '') $$;
