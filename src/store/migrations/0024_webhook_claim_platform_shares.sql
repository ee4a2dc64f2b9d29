-- Claims share a worker's room among the platforms with due lanes.
--
-- Until now a claim took the lanes that fell due first, whoever they were for (0021, 0022). A platform that
-- made many notifications at once (an import, a batch of trades) then had every slot of every worker until
-- its backlog was delivered, and every other platform waited behind it: 100,000 notifications ahead at about
-- 4,000 a second is 25 s; at a receiver that answers in 200 ms, on 10 slots, nearly three hours.
--
-- Now a claim of p_limit lanes shares them equally among the platforms with due lanes (those in p_capped,
-- whose receivers are slow, at most p_capped_limit between them, as in 0022), the lanes of each that fell due
-- first; what a platform leaves of its share (it had fewer due lanes) goes to the others, in further rounds,
-- those that have taken fewest first. The platforms are served in random order, so that when a claim takes
-- fewer lanes than there are platforms, each has the same chance (in due order the oldest backlog would always
-- win). The lanes come back interleaved: every platform's first lane, in the order they fell due, then every
-- platform's second, and so on, so that a worker, which starts them in the order claimed, takes the platforms
-- in turn. With one platform due this is 0022's claim.
--
-- The platforms are found through the index on (platform_code, due_at) of 0023, one descent per platform with
-- a lane (webhook_lane_platforms, a loose index scan), and each platform's due lanes through the same index,
-- so a capped platform's due backlog is no longer passed over lane by lane (0022: 10-14 ms a claim beside
-- 100,000). A claim costs one descent per platform with a lane, due or not: 6-7 us each on the development
-- VM, 6.6 ms a claim beside 1,000 such platforms (review).

-- Each platform that has a lane, with the time its first lane falls due (or fell due).
create function webhook_lane_platforms()
returns table (platform_code text, first_due_at timestamptz)
language plpgsql stable
-- As the lane functions (0009): one plan, through the index, whatever the statistics say.
set plan_cache_mode = force_generic_plan
set enable_seqscan = off
as $$
begin
  return query
    with recursive first_lanes as (
      (select w.platform_code, w.due_at from webhook_lanes w
        order by w.platform_code collate "C", w.due_at limit 1)
      union all
      select n.platform_code, n.due_at
      from first_lanes f
      cross join lateral (
        select w.platform_code, w.due_at from webhook_lanes w
        where w.platform_code collate "C" > f.platform_code
        order by w.platform_code collate "C", w.due_at
        limit 1
      ) n
    )
    select f.platform_code, f.due_at from first_lanes f;
end;
$$;

create or replace function webhook_claim_lanes(p_owner text, p_limit integer, p_lease_ms integer,
  p_per_lane integer, p_capped text[], p_capped_limit integer)
returns table (
  platform_code text, resource_key text, notification_id uuid, seq bigint, payload_type text, payload jsonb,
  created_at timestamptz, state_token uuid, round_attempts integer, attempt_count integer, due boolean,
  wait_ms integer, url text, secret_ciphertext bytea, skip_reason text, round_started_at timestamptz
)
language plpgsql volatile
-- See 0009, and the undelivered index of 0011: every statement here has one index that fits it (a key, a
-- ctid, the platform and due index), whatever the statistics say.
set plan_cache_mode = force_generic_plan
set enable_seqscan = off
as $$
declare
  -- "Due" is now as the claim starts, read once, so that it bounds the index range (0022).
  v_now timestamptz := clock_timestamp();
  v_left integer := p_limit;
  v_capped_left integer := least(p_capped_limit, p_limit);
  -- The platforms of this round, and those that took their whole share (they may have more).
  v_round text[];
  v_wanting text[];
  v_unserved integer;
  v_code text;
  v_capped boolean;
  v_take integer;
  v_got tid[];
  v_got_due timestamptz[];
  v_taken integer;
  v_platforms integer := 0;
  -- The lanes taken, with their platform and due time.
  v_ctids tid[] := '{}';
  v_codes text[] := '{}';
  v_dues timestamptz[] := '{}';
begin
  select coalesce(array_agg(p.platform_code order by random()), '{}') into v_wanting
  from webhook_lane_platforms() p
  where p.first_due_at <= v_now;
  while v_left > 0 loop
    if v_capped_left <= 0 then
      v_wanting := array(
        select u.code from unnest(v_wanting) with ordinality as u(code, place)
        where not (u.code = any (p_capped)) order by u.place);
    end if;
    exit when cardinality(v_wanting) = 0;
    v_round := v_wanting;
    v_wanting := '{}';
    v_unserved := cardinality(v_round);
    foreach v_code in array v_round loop
      -- An equal share of what is left among the platforms not yet served this round (rounded up: at least 1).
      v_take := (v_left + v_unserved - 1) / v_unserved;
      v_unserved := v_unserved - 1;
      v_capped := v_code = any (p_capped);
      if v_capped then
        v_take := least(v_take, v_capped_left);
      end if;
      continue when v_take <= 0;
      -- The platform's lanes due by now: from (v_code, the start of time) to (v_code, v_now), written as that
      -- range of (platform, due) rather than "platform = v_code and due_at <= v_now", which the plan could
      -- read through the index on due_at alone (0008), the platform being one value, in the order asked for,
      -- passing over every other platform's lanes due earlier (38 ms a claim beside 100,000). Only the index
      -- on both gives this range and order. (Lanes this claim already holds are locked by it, so SKIP LOCKED
      -- would not skip them: hence the ctid.)
      select coalesce(array_agg(l.ctid), '{}'), coalesce(array_agg(l.due_at), '{}') into v_got, v_got_due
      from (
        select w.ctid, w.due_at from webhook_lanes w
        where w.platform_code collate "C" >= v_code
          and (w.platform_code collate "C", w.due_at) <= (v_code, v_now)
          and w.ctid <> all (v_ctids)
        order by w.platform_code collate "C", w.due_at
        limit v_take
        for no key update skip locked
      ) l;
      v_taken := cardinality(v_got);
      continue when v_taken = 0;
      if not (v_code = any (v_codes)) then
        v_platforms := v_platforms + 1;
      end if;
      v_ctids := v_ctids || v_got;
      v_codes := v_codes || array_fill(v_code, array[v_taken]);
      v_dues := v_dues || v_got_due;
      v_left := v_left - v_taken;
      if v_capped then
        v_capped_left := v_capped_left - v_taken;
      end if;
      if v_taken = v_take then
        v_wanting := v_wanting || v_code;
      end if;
    end loop;
    -- The next round serves first those that have taken fewest (a share rounded up went to those served
    -- first).
    v_wanting := array(
      select u.code from unnest(v_wanting) with ordinality as u(code, place)
      order by cardinality(array_positions(v_codes, u.code)), u.place);
  end loop;
  if cardinality(v_ctids) = 0 then
    return;
  end if;
  -- In turn: each platform's first lane, in the order they fell due, then each one's second, and so on. One
  -- platform's are in due order already.
  if v_platforms > 1 then
    select array_agg(t.lane order by t.turn, t.due_at, t.lane) into v_ctids
    from (
      select u.lane, u.due_at, row_number() over (partition by u.code order by u.due_at, u.lane) as turn
      from unnest(v_ctids, v_codes, v_dues) as u(lane, code, due_at)
    ) t;
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
