-- Cheaper delivery bookkeeping (issue 4 "Speed"): a delivery's record costs one row update, and the lane
-- functions run fewer statements per call.
--
-- 1. Attempts are kept on their notification's row. Until now every attempt was a row of webhook_attempts:
--    an insert per delivery, with two index entries and a foreign-key check (the check alone was 5 % of
--    PostgreSQL's CPU in the lane functions, by perf, batches of 20). The notification row is rewritten by every attempt's result anyway, so it now carries the latest attempt in
--    last_attempt_* columns, and the earlier ones of the row in earlier_attempts (a JSON array, appended
--    to only when a notification is attempted again: retries). The rows of webhook_attempts written before
--    this migration stay, in webhook_attempts_before_0011; the view webhook_attempts shows all three
--    together, with the columns the table had (but attempt_id: order by attempt_number).
-- 2. The lane functions of 0008 are redefined with the same signatures and results, in fewer statements:
--    each statement a plpgsql function runs costs its executor start-up and shutdown (measured with the
--    lane functions alone: 86 µs of PostgreSQL CPU per delivery in batches of 10, 52 µs in batches of 40,
--    so about 450 µs fixed per claim and settle), so the claim's update and read are one statement, the
--    settle parses its input once and runs the lease renewal only when something asks for it, and the
--    release updates and deletes its lanes in one statement instead of one per lane with work left.

alter table webhook_attempts rename to webhook_attempts_before_0011;

alter table webhook_notifications
  add column last_attempt_duration_ms integer check (last_attempt_duration_ms >= 0),
  add column last_attempt_status_code integer,
  add column last_attempt_error text,
  -- null: the row's attempts (if any) are all in webhook_attempts_before_0011.
  add column last_attempt_outcome text
    check (last_attempt_outcome in ('delivered', 'failed', 'gone', 'aborted')),
  add column last_attempt_worker text,
  -- The attempts before the latest one made since this migration, oldest first: each
  -- {attempt_number, started_at, duration_ms, status_code, error, outcome, worker}. Null: none.
  add column earlier_attempts jsonb;

-- Every attempt (DESIGN §3: time, status code, error, duration), as webhook_attempts was. A query by
-- notification_id reaches each part through an index (the primary keys, the old table's own index).
create view webhook_attempts as
  select a.notification_id, a.attempt_number, a.started_at, a.duration_ms, a.status_code, a.error, a.outcome,
    a.worker
  from webhook_attempts_before_0011 a
  union all
  select n.notification_id, e.attempt_number, e.started_at, e.duration_ms, e.status_code, e.error, e.outcome,
    e.worker
  from webhook_notifications n
  cross join lateral jsonb_to_recordset(n.earlier_attempts) as e(
    attempt_number integer, started_at timestamptz, duration_ms integer, status_code integer, error text,
    outcome text, worker text)
  where n.earlier_attempts is not null
  union all
  select n.notification_id, n.attempt_count, n.last_attempt_at, n.last_attempt_duration_ms,
    n.last_attempt_status_code, n.last_attempt_error, n.last_attempt_outcome, n.last_attempt_worker
  from webhook_notifications n
  where n.last_attempt_outcome is not null;

-- The index through which the lane functions find a lane's oldest undelivered notifications, in the "C"
-- collation, which their lookups ask for and no other index of the table has; and the one on seq that the
-- oldest-pending gauge used, now on created_at. These functions keep one generic plan per statement and
-- connection (0009), made at the first call: on a new database, whose statistics say the table is empty,
-- every index that can give a platform's or a resource's notifications in seq order cost the same as this
-- one, and the plan could read them through the index on the platform alone, or on seq alone, for the
-- connection's life. Once the table had grown, each lookup read every notification of the platform or every
-- undelivered one: a bench run fell from 10,000 deliveries a second to a few hundred, leases expired, and
-- notifications went out again. Now this index is the only one that can take both keys or give seq order
-- after them, so it is the plan whatever the statistics say (test/integration/webhook-lane-plans.test.ts).
drop index webhook_notifications_undelivered;
create index webhook_notifications_undelivered
  on webhook_notifications (platform_code collate "C", resource_key collate "C", seq)
  where status in ('pending', 'retrying');
drop index webhook_notifications_open_seq;
create index webhook_notifications_open_created
  on webhook_notifications (created_at) where status in ('pending', 'retrying');

-- One settle item (see webhook_settle_lanes), so that the JSON input is parsed once.
create type webhook_settle_item as (
  idx integer, platform_code text, resource_key text, renew boolean, release boolean,
  id uuid, token uuid, new_token uuid, attempted boolean, started_at_ms bigint, duration_ms integer,
  status_code integer, error text, outcome text, status text, reason text, round_attempts integer,
  delay_ms integer
);

-- As in 0008; the claim's update and its read of the lanes' notifications are one statement. Its snapshot
-- is taken after the first statement locked the lanes, so a lane just released by another worker is still
-- seen as that worker left it.
create or replace function webhook_claim_lanes(p_owner text, p_limit integer, p_lease_ms integer,
  p_per_lane integer)
returns table (
  platform_code text, resource_key text, notification_id uuid, seq bigint, payload_type text, payload jsonb,
  created_at timestamptz, state_token uuid, round_attempts integer, attempt_count integer, due boolean,
  wait_ms integer, url text, secret_ciphertext bytea, skip_reason text
)
language plpgsql volatile
-- See 0009, and the undelivered index above: every statement here has one index that fits it (a key, a
-- ctid, the due index), whatever the statistics say.
set plan_cache_mode = force_generic_plan
set enable_seqscan = off
as $$
declare
  v_ctids tid[];
begin
  -- Locked first, then updated by ctid (a locked row keeps it): a TID scan whatever the planner thinks of
  -- the table's size.
  select array_agg(l.ctid) into v_ctids
  from (
    select ctid from webhook_lanes
    where due_at <= clock_timestamp()
    order by due_at
    limit p_limit
    for no key update skip locked
  ) l;
  if v_ctids is null then
    return;
  end if;
  return query
    with claimed as (
      update webhook_lanes l
      set owner = p_owner, claimed_at = clock_timestamp(),
          due_at = clock_timestamp() + p_lease_ms * interval '1 millisecond'
      where l.ctid = any (v_ctids)
      returning l.platform_code, l.resource_key
    )
    select c.platform_code, c.resource_key, n.notification_id, n.seq, n.payload_type, n.payload, n.created_at,
      n.state_token, n.round_attempts, n.attempt_count,
      n.next_attempt_at <= clock_timestamp(),
      greatest(0, ceil(extract(epoch from (n.next_attempt_at - clock_timestamp())) * 1000))::int,
      e.url, e.secret_ciphertext,
      webhook_skip_reason(e.enabled, e.payload_types, n.payload_type)
    from claimed c
    left join lateral (
      select * from webhook_notifications w
      -- In the undelivered index's collation, which no other index of the table has (see below).
      where w.platform_code collate "C" = c.platform_code and w.resource_key collate "C" = c.resource_key
        and w.status in ('pending', 'retrying')
      order by w.seq
      limit p_per_lane
    ) n on true
    left join webhook_endpoints e on e.platform_code = c.platform_code
    order by c.platform_code, c.resource_key, n.seq;
end;
$$;

-- As in 0008; the lanes locked are then updated (work left: due when their head is) or deleted (empty) by
-- one statement, a new one, so its snapshot sees everything committed before the locks were taken.
create or replace function webhook_release_lanes(p_platforms text[], p_resources text[], p_owner text)
returns void
language plpgsql volatile
set plan_cache_mode = force_generic_plan
set enable_seqscan = off
as $$
declare
  v_locked tid[];
begin
  -- The lanes still ours, locked without waiting: a producer recording into one holds it FOR KEY SHARE.
  v_locked := array(
    select l.ctid
    from (select u.p, u.r from unnest(p_platforms, p_resources) as u(p, r) order by u.p, u.r) u
    cross join lateral (
      select l.ctid from webhook_lanes l
      where l.platform_code = u.p and l.resource_key = u.r and l.owner = p_owner
      for update skip locked
    ) l
  );
  -- Those a producer holds (or no longer ours): left due now for the next claim to look at (NO KEY UPDATE does
  -- not wait for a producer). Usually every lane was locked, and there is nothing to look for.
  if cardinality(v_locked) < cardinality(p_platforms) then
    update webhook_lanes l set owner = null, claimed_at = null, due_at = clock_timestamp()
    where l.ctid = any (array(
        select l.ctid
        from unnest(p_platforms, p_resources) as u(p, r)
        cross join lateral (
          select l.ctid from webhook_lanes l
          where l.platform_code = u.p and l.resource_key = u.r and l.owner = p_owner
          limit 1
        ) l
      ))
      and not (l.ctid = any (v_locked));
  end if;
  if cardinality(v_locked) = 0 then
    return;
  end if;
  with heads as (
    select l.ctid as lane, h.next_attempt_at
    from webhook_lanes l
    left join lateral (
      select n.next_attempt_at from webhook_notifications n
      -- In the undelivered index's collation (see below).
      where n.platform_code collate "C" = l.platform_code and n.resource_key collate "C" = l.resource_key
        and n.status in ('pending', 'retrying')
      order by n.seq
      limit 1
    ) h on true
    where l.ctid = any (v_locked)
  ), due as (
    update webhook_lanes l set owner = null, claimed_at = null, due_at = h.next_attempt_at
    from heads h
    where l.ctid = any (array(select h.lane from heads h where h.next_attempt_at is not null))
      and l.ctid = h.lane
  )
  delete from webhook_lanes l
  where l.ctid = any (array(select h.lane from heads h where h.next_attempt_at is null));
end;
$$;

-- As in 0008 (p_items: a JSON array of webhook_settle_item; absent keys are null), with each attempt
-- recorded on its notification's row (see above) rather than as a row of its own.
create or replace function webhook_settle_lanes(p_owner text, p_lease_ms integer, p_items jsonb)
returns table (idx integer, lease_held boolean, applied boolean)
language plpgsql volatile
set plan_cache_mode = force_generic_plan
set enable_seqscan = off
as $$
#variable_conflict use_column
declare
  v_items webhook_settle_item[];
  v_ids uuid[];
  v_renew boolean;
  v_platforms text[];
  v_resources text[];
begin
  -- Every row is found through its key, one probe per item (LATERAL ... LIMIT, `= any`, ctid): joined to
  -- the input rows, which the planner estimates at 100, it chose hash joins over sequential scans.
  select array_agg(x), array_agg(x.id) filter (where x.id is not null), coalesce(bool_or(x.renew), false),
    array_agg(x.platform_code) filter (where x.release), array_agg(x.resource_key) filter (where x.release)
  into v_items, v_ids, v_renew, v_platforms, v_resources
  from jsonb_populate_recordset(null::webhook_settle_item, p_items) x;

  if v_renew then
    update webhook_lanes set due_at = clock_timestamp() + p_lease_ms * interval '1 millisecond'
    where ctid = any (array(
        select l.ctid
        from unnest(v_items) i
        cross join lateral (
          select l.ctid from webhook_lanes l
          where l.platform_code = i.platform_code and l.resource_key = i.resource_key and l.owner = p_owner
          limit 1
        ) l
        where i.renew
      ))
      and owner = p_owner;
  end if;

  return query
  with updated as (
    update webhook_notifications n set
      attempt_count = n.attempt_count + case when i.attempted then 1 else 0 end,
      -- The latest attempt so far joins the earlier ones.
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
      status = case when n.state_token = i.token then i.status else n.status end,
      status_reason = case when n.state_token = i.token then i.reason else n.status_reason end,
      round_attempts = case when n.state_token = i.token then i.round_attempts else n.round_attempts end,
      next_attempt_at = case when n.state_token = i.token and i.delay_ms is not null
        then clock_timestamp() + i.delay_ms * interval '1 millisecond' else n.next_attempt_at end,
      delivered_at = case when n.state_token = i.token and i.status = 'delivered'
        then clock_timestamp() else n.delivered_at end,
      dead_at = case when n.state_token = i.token and i.status = 'dead' then clock_timestamp() else n.dead_at end,
      state_token = case when n.state_token = i.token then i.new_token else n.state_token end
    from unnest(v_items) i
    where n.notification_id = any (v_ids) and n.notification_id = i.id
    returning i.idx, n.state_token = i.new_token as applied
  )
  select i.idx, h.held is not null, u.applied
  from unnest(v_items) i
  left join lateral (
    select true as held from webhook_lanes l
    where l.platform_code = i.platform_code and l.resource_key = i.resource_key and l.owner = p_owner
    limit 1
  ) h on true
  left join updated u on u.idx = i.idx;

  -- Last, so that the releases see the records.
  if v_platforms is not null then
    perform webhook_release_lanes(v_platforms, v_resources, p_owner);
  end if;
end;
$$;

