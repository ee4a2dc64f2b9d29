-- Webhook delivery by dispatchers that claim many lanes per statement (issue 4 "Speed").
--
-- Until now every lane (one platform's notifications for one resource key) had a graphile-worker job of its
-- own, and a lease row while a worker held it. The queue's own per-job cost (measured: empty jobs reach 0.18
-- of a plain POST loop) then bounded delivery, whatever the delivery did. DESIGN §5 leaves to a table of our
-- own what the queue cannot express, per-resource order and the delivery schedule; a lane is exactly that,
-- so lanes now live here, one row per lane with undelivered work, and each worker process's dispatcher
-- claims the due ones many at a time (SKIP LOCKED), woken by NOTIFY on channel `svc_webhooks`.
--
-- due_at is when the lane may next be claimed: its head's next attempt while nobody holds it, the lease's
-- expiry while a worker does (owner set). So one index range, due_at <= now, finds both the lanes whose work
-- is due and the lanes of a worker that died mid-delivery (issue 4 point 5: the lease is the request timeout
-- + 5 s and more), and nothing else.
--
-- Locks (so that producers never wait on deliveries, and no notification is left without its lane):
--   * a producer holds FOR KEY SHARE on its lane row until it commits (webhook_wake_lane);
--   * claims and lease renewals update non-key columns (FOR NO KEY UPDATE): they do not conflict with it;
--   * a release takes the row FOR UPDATE SKIP LOCKED, which a producer's KEY SHARE blocks: then the lane is
--     left due at once, and the next claim looks again. Holding the row, it reads the lane in a fresh
--     snapshot, so every producer that committed before is seen and every later one waits for the release.

create table webhook_lanes (
  platform_code text not null,
  resource_key text not null,
  due_at timestamptz not null,
  -- The dispatcher holding the lane (host:pid:run), or null.
  owner text,
  claimed_at timestamptz,
  primary key (platform_code, resource_key)
);
create index webhook_lanes_due on webhook_lanes (due_at);

-- Makes sure a lane row exists for a notification being recorded, and holds it FOR KEY SHARE until the
-- caller commits, so that no release can decide the lane is empty before this notification is visible.
-- Also wakes the dispatchers (NOTIFY is sent at commit, once per transaction).
create function webhook_wake_lane(p_platform text, p_resource text) returns void
language plpgsql volatile as $$
begin
  loop
    insert into webhook_lanes (platform_code, resource_key, due_at)
    values (p_platform, p_resource, clock_timestamp())
    on conflict (platform_code, resource_key) do nothing;
    exit when found;
    -- It exists: lock it, unless a release deleted it in between (then insert it again).
    perform 1 from webhook_lanes
    where platform_code = p_platform and resource_key = p_resource
    for key share;
    exit when found;
  end loop;
  perform pg_notify('svc_webhooks', '');
end;
$$;

-- Claims up to p_limit due lanes for p_owner until now + p_lease_ms and returns, for each, its oldest
-- p_per_lane undelivered notifications with what delivering them needs (one row with null notification for
-- a lane found empty). The notifications are read by a second statement, after the claim, in a fresh
-- snapshot: a lane just released by another worker is seen as that worker left it.
create function webhook_claim_lanes(p_owner text, p_limit integer, p_lease_ms integer, p_per_lane integer)
returns table (
  platform_code text, resource_key text, notification_id uuid, seq bigint, payload_type text, payload jsonb,
  created_at timestamptz, state_token uuid, round_attempts integer, attempt_count integer, due boolean,
  wait_ms integer, url text, secret_ciphertext bytea, skip_reason text
)
language plpgsql volatile
-- Planned on every call, with the batch at hand: a plan cached while the tables were small (a new
-- database, a quiet night) scanned them whole once they had grown, filtering by the key arrays.
set plan_cache_mode = force_custom_plan
as $$
declare
  v_ctids tid[];
  v_platforms text[];
  v_resources text[];
begin
  -- Locked first, then updated by ctid (a locked row keeps it): a TID scan, whatever the planner thinks of
  -- the table's size (joined on the key, it hash-joined a sequential scan of every lane).
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
  with claimed as (
    update webhook_lanes l
    set owner = p_owner, claimed_at = clock_timestamp(),
        due_at = clock_timestamp() + p_lease_ms * interval '1 millisecond'
    where l.ctid = any (v_ctids)
    returning l.platform_code, l.resource_key
  )
  select array_agg(c.platform_code), array_agg(c.resource_key) into v_platforms, v_resources from claimed c;
  if v_platforms is null then
    return;
  end if;
  return query
    select c.platform_code, c.resource_key, n.notification_id, n.seq, n.payload_type, n.payload, n.created_at,
      n.state_token, n.round_attempts, n.attempt_count,
      n.next_attempt_at <= clock_timestamp(),
      greatest(0, ceil(extract(epoch from (n.next_attempt_at - clock_timestamp())) * 1000))::int,
      e.url, e.secret_ciphertext,
      webhook_skip_reason(e.enabled, e.payload_types, n.payload_type)
    from unnest(v_platforms, v_resources) as c(platform_code, resource_key)
    left join lateral (
      select * from webhook_notifications w
      where w.platform_code = c.platform_code and w.resource_key = c.resource_key
        and w.status in ('pending', 'retrying')
      order by w.seq
      limit p_per_lane
    ) n on true
    left join webhook_endpoints e on e.platform_code = c.platform_code
    order by c.platform_code, c.resource_key, n.seq;
end;
$$;

-- Gives back the lanes p_owner holds: deletes those found empty, leaves the others due when their head is.
-- Set-based (one primary-key probe per lane, then TID scans), in (platform, resource) order, as a
-- redelivery wakes lanes, so the two never deadlock.
create function webhook_release_lanes(p_platforms text[], p_resources text[], p_owner text) returns void
language plpgsql volatile
-- Planned on every call, with the batch at hand: a plan cached while the tables were small (a new
-- database, a quiet night) scanned them whole once they had grown, filtering by the key arrays.
set plan_cache_mode = force_custom_plan
as $$
declare
  v_locked tid[];
  v_empty tid[] := '{}';
  v_lane record;
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
  -- A new statement, so a new snapshot: everything committed before the locks were taken is seen, and a
  -- producer that comes later waits for this transaction.
  for v_lane in
    select l.ctid, h.next_attempt_at
    from webhook_lanes l
    left join lateral (
      select n.next_attempt_at from webhook_notifications n
      where n.platform_code = l.platform_code and n.resource_key = l.resource_key
        and n.status in ('pending', 'retrying')
      order by n.seq
      limit 1
    ) h on true
    where l.ctid = any (v_locked)
  loop
    if v_lane.next_attempt_at is null then
      v_empty := v_empty || v_lane.ctid;
    else
      update webhook_lanes set owner = null, claimed_at = null, due_at = v_lane.next_attempt_at
      where ctid = v_lane.ctid;
    end if;
  end loop;
  delete from webhook_lanes where ctid = any (v_empty);
end;
$$;

-- Settles a batch of p_owner's lanes in one round trip: records attempts' results (each: the attempt row,
-- and the notification's new state if its state token is still the one the attempt started from, so an
-- operator's redelivery during the attempt wins), extends the leases marked `renew`, then gives back the
-- lanes marked `release` (after the records, so the release sees them). p_items: a JSON array of
-- {idx, platform_code, resource_key, renew, release, and for a result: id, token, new_token, attempted,
--  started_at_ms, duration_ms, status_code, error, outcome, status, reason, round_attempts, delay_ms}.
-- Returns, per item, whether the lease is still p_owner's and whether the result's state change applied.
create function webhook_settle_lanes(p_owner text, p_lease_ms integer, p_items jsonb)
returns table (idx integer, lease_held boolean, applied boolean)
language plpgsql volatile
-- Planned on every call, with the batch at hand: a plan cached while the tables were small (a new
-- database, a quiet night) scanned them whole once they had grown, filtering by the key arrays.
set plan_cache_mode = force_custom_plan
as $$
#variable_conflict use_column
declare
  v_ids uuid[];
  v_renew tid[];
  v_platforms text[];
  v_resources text[];
begin
  -- Every row is found through its key, one probe per item (LATERAL ... LIMIT, `= any`, ctid): joined to
  -- the input rows, which the planner estimates at 100, it chose hash joins over sequential scans.
  select array_agg(x.id) filter (where x.id is not null),
    array_agg(x.platform_code) filter (where x.release), array_agg(x.resource_key) filter (where x.release)
  into v_ids, v_platforms, v_resources
  from jsonb_to_recordset(p_items) as x(id uuid, platform_code text, resource_key text, release boolean);
  v_renew := array(
    select l.ctid
    from jsonb_to_recordset(p_items) as i(platform_code text, resource_key text, renew boolean)
    cross join lateral (
      select l.ctid from webhook_lanes l
      where l.platform_code = i.platform_code and l.resource_key = i.resource_key and l.owner = p_owner
      limit 1
    ) l
    where i.renew
  );
  update webhook_lanes set due_at = clock_timestamp() + p_lease_ms * interval '1 millisecond'
  where ctid = any (v_renew) and owner = p_owner;

  return query
  with input as (
    select * from jsonb_to_recordset(p_items) as x(
      idx integer, platform_code text, resource_key text, id uuid, token uuid, new_token uuid,
      attempted boolean, started_at_ms bigint, duration_ms integer, status_code integer, error text,
      outcome text, status text, reason text, round_attempts integer, delay_ms integer)
  ), updated as (
    update webhook_notifications n set
      attempt_count = n.attempt_count + case when i.attempted then 1 else 0 end,
      last_attempt_at = case when i.attempted then to_timestamp(i.started_at_ms / 1000.0) else n.last_attempt_at end,
      status = case when n.state_token = i.token then i.status else n.status end,
      status_reason = case when n.state_token = i.token then i.reason else n.status_reason end,
      round_attempts = case when n.state_token = i.token then i.round_attempts else n.round_attempts end,
      next_attempt_at = case when n.state_token = i.token and i.delay_ms is not null
        then clock_timestamp() + i.delay_ms * interval '1 millisecond' else n.next_attempt_at end,
      delivered_at = case when n.state_token = i.token and i.status = 'delivered'
        then clock_timestamp() else n.delivered_at end,
      dead_at = case when n.state_token = i.token and i.status = 'dead' then clock_timestamp() else n.dead_at end,
      state_token = case when n.state_token = i.token then i.new_token else n.state_token end
    from input i
    where n.notification_id = any (v_ids) and n.notification_id = i.id
    returning i.idx, n.attempt_count, n.state_token = i.new_token as applied
  ), attempt as (
    insert into webhook_attempts
      (notification_id, attempt_number, started_at, duration_ms, status_code, error, outcome, worker)
    select i.id, u.attempt_count, to_timestamp(i.started_at_ms / 1000.0), i.duration_ms, i.status_code, i.error,
      i.outcome, p_owner
    from updated u join input i on i.idx = u.idx
    where i.attempted
  )
  select i.idx, h.held is not null, u.applied
  from input i
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

-- Lanes for the undelivered notifications of an earlier version, due when their heads are.
insert into webhook_lanes (platform_code, resource_key, due_at)
select distinct on (platform_code, resource_key) platform_code, resource_key, next_attempt_at
from webhook_notifications
where status in ('pending', 'retrying')
order by platform_code, resource_key, seq;

-- The earlier version's lane jobs, leases and their functions. graphile-worker's schema is installed after
-- this project's migrations, so on a new database there is no queue yet and nothing to remove.
do $$
begin
  if to_regprocedure('graphile_worker.remove_job(text)') is not null then
    execute $q$select graphile_worker.remove_job(key) from graphile_worker.jobs
      where task_identifier = 'webhooks.deliver_lane' and key is not null$q$;
  end if;
end;
$$;
drop function webhook_claim_lease(text, text, text, integer, text, text);
drop function webhook_release_lease(text, text, text, text, text);
drop table webhook_delivery_leases;
-- It served the old sweeper; the lanes' own due index replaces it.
drop index webhook_notifications_due;
