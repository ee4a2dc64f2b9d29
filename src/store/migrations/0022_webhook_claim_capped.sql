-- A claim that takes few lanes, or none, of the platforms whose receivers are slow.
--
-- A platform whose receiver hangs holds a worker's slot for one attempt timeout (10 s) per lane. With a
-- backlog of such lanes, all due before another platform's notification, every slot went to them in turn,
-- and the other platform waited one timeout per slot for each lane of the backlog (12 lanes on 2 slots at a
-- 1.5 s timeout: 9 s; 1,000 lanes on 10 slots at the default timeout: 17 minutes). A worker now lets the
-- platforms it finds slow share at most half of its slots (webhook-dispatcher.ts), and claims with this
-- function: at most p_capped_limit due lanes of the platforms in p_capped, the rest of p_limit from every
-- other platform, all in the order they fell due, as in 0021.
--
-- "Due" is now as the claim starts, read once into a variable: `due_at <= clock_timestamp()` (0008-0021)
-- could not bound the due index's range (a volatile function is a filter, not an index condition), so a
-- claim that found fewer due lanes than it asked for read every lane to the end of the index, those leased
-- and those waiting for a retry too (review: 31-43 ms a claim beside 200,000 lanes not due, against 2 ms).
--
-- The due index has no platform, so the lanes of a capped platform that are due are passed over one by one
-- (a heap fetch each), by the claim and by the dispatcher's next-due query, only while some receiver is slow,
-- and the cost grows with that platform's due backlog: beside 100,000 due lanes of it, 10-14 ms a claim
-- (against 0.8 ms) and 5.6 ms the next-due query (review). An index on (platform_code, due_at) would cost
-- every lane write instead, the delivery's hot path.
--
-- The four-argument function of 0021 stays, for workers of the version before during a rolling deploy, as
-- this one with no platform capped.

create function webhook_claim_lanes(p_owner text, p_limit integer, p_lease_ms integer,
  p_per_lane integer, p_capped text[], p_capped_limit integer)
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
  v_capped tid[] := '{}';
  v_capped_due timestamptz[] := '{}';
  v_ctids tid[];
  v_now timestamptz := clock_timestamp();
begin
  -- The capped platforms' share first (usually none: no receiver is slow).
  if p_capped_limit > 0 and cardinality(p_capped) > 0 then
    select coalesce(array_agg(l.ctid), '{}'), coalesce(array_agg(l.due_at), '{}')
    into v_capped, v_capped_due
    from (
      select w.ctid, w.due_at from webhook_lanes w
      where w.due_at <= v_now and w.platform_code = any (p_capped)
      order by w.due_at
      limit least(p_capped_limit, p_limit)
      for no key update skip locked
    ) l;
  end if;
  -- Then every other platform's, and both locked together in due order (a locked row keeps its ctid).
  select array_agg(l.ctid order by l.due_at, l.ctid) into v_ctids
  from (
    select o.ctid, o.due_at from (
      select w.ctid, w.due_at from webhook_lanes w
      where w.due_at <= v_now and not (w.platform_code = any (p_capped))
      order by w.due_at
      limit greatest(0, p_limit - cardinality(v_capped))
      for no key update skip locked
    ) o
    union all
    select c.ctid, c.due_at from unnest(v_capped, v_capped_due) as c(ctid, due_at)
  ) l;
  if v_ctids is null then
    return;
  end if;
  -- As in 0021.
  return query
    with claimed as (
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

-- 0021's signature and result, so that its callers see no change; one claim to maintain.
create or replace function webhook_claim_lanes(p_owner text, p_limit integer, p_lease_ms integer,
  p_per_lane integer)
returns table (
  platform_code text, resource_key text, notification_id uuid, seq bigint, payload_type text, payload jsonb,
  created_at timestamptz, state_token uuid, round_attempts integer, attempt_count integer, due boolean,
  wait_ms integer, url text, secret_ciphertext bytea, skip_reason text, round_started_at timestamptz
)
language sql volatile
as $$
  select * from webhook_claim_lanes(p_owner, p_limit, p_lease_ms, p_per_lane, '{}'::text[], 0)
$$;

