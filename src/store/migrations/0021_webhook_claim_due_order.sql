-- A claim returns its lanes in the order they fell due, not in platform and resource order.
--
-- The lanes a claim takes were always the oldest due (the due index, `limit`), but they came back sorted by
-- platform and resource key, and a worker starts the lanes it claimed in the order they came. Within one claim
-- (up to 8 deliveries per slot), a platform whose code sorts first went first: its retries, due a moment ago,
-- before another platform's notification due long before, and again at every claim. Now the lanes keep the
-- due order of the statement that locked them, each lane's notifications still together and oldest first.
-- Same signature and result as 0012, so a worker of the version before goes on working during a rolling
-- deploy (it reads the columns by name and groups a lane's rows as they come, which this order keeps).

create or replace function webhook_claim_lanes(p_owner text, p_limit integer, p_lease_ms integer,
  p_per_lane integer)
returns table (
  platform_code text, resource_key text, notification_id uuid, seq bigint, payload_type text, payload jsonb,
  created_at timestamptz, state_token uuid, round_attempts integer, attempt_count integer, due boolean,
  wait_ms integer, url text, secret_ciphertext bytea, skip_reason text, round_started_at timestamptz
)
language plpgsql volatile
-- See 0009, and the undelivered index of 0011: every statement here has one index that fits it (a key, a
-- ctid, the due index), whatever the statistics say.
set plan_cache_mode = force_generic_plan
set enable_seqscan = off
as $$
declare
  v_ctids tid[];
begin
  -- Locked first, in due order, then updated by ctid (a locked row keeps it): a TID scan whatever the planner
  -- thinks of the table's size.
  select array_agg(l.ctid order by l.due_at, l.ctid) into v_ctids
  from (
    select ctid, due_at from webhook_lanes
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
      -- The lane's place in v_ctids is its place in due order (the update rewrites due_at, and the row's
      -- ctid with it).
      update webhook_lanes l
      set owner = p_owner, claimed_at = clock_timestamp(),
          due_at = clock_timestamp() + p_lease_ms * interval '1 millisecond'
      from unnest(v_ctids) with ordinality as o(lane, place)
      where l.ctid = any (v_ctids) and l.ctid = o.lane
      returning l.platform_code, l.resource_key, o.place
    )
    select c.platform_code, c.resource_key, n.notification_id, n.seq, n.payload_type, n.payload, n.created_at,
      n.state_token, n.round_attempts, n.attempt_count,
      n.next_attempt_at <= clock_timestamp(),
      greatest(0, ceil(extract(epoch from (n.next_attempt_at - clock_timestamp())) * 1000))::int,
      e.url, e.secret_ciphertext,
      webhook_skip_reason(e.enabled, e.payload_types, n.payload_type),
      coalesce(n.redelivered_at, n.created_at)
    from claimed c
    left join lateral (
      select * from webhook_notifications w
      -- In the undelivered index's collation, which no other index of the table has (0011).
      where w.platform_code collate "C" = c.platform_code and w.resource_key collate "C" = c.resource_key
        and w.status in ('pending', 'retrying')
      order by w.seq
      limit p_per_lane
    ) n on true
    left join webhook_endpoints e on e.platform_code = c.platform_code
    order by c.place, n.seq;
end;
$$;
