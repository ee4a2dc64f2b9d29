-- Claims share a worker's room among the platforms with due lanes.
--
-- Until now a claim took the lanes that fell due first, whoever they were for (0021, 0022). A platform that
-- made many notifications at once (an import, a batch of trades) then had every slot of every worker until
-- its backlog was delivered, and every other platform waited behind it: 100,000 notifications ahead at about
-- 4,000 a second is 25 s; at a receiver that answers in 200 ms, on 10 slots, nearly three hours.
--
-- Now a claim of p_limit lanes shares them equally among the platforms with due lanes (those in p_capped,
-- whose receivers are slow, at most p_capped_limit between them, as in 0022), the lanes of each that fell due
-- first; what platforms leave of their shares (they had fewer due lanes) is shared equally among the others in
-- a further round, and so on; the spare lanes of a share that does not divide go to the platforms that have
-- taken fewest. The platforms are served in random order, so that when a claim takes fewer lanes than there
-- are platforms, each has the same chance (in due order the oldest backlog would always win). The lanes come
-- back interleaved: every platform's first lane, in the order they fell due, then every platform's second, and
-- so on, so that a worker, which starts them in the order claimed, takes the platforms in turn. With one
-- platform due this is 0022's claim.
--
-- The platforms are found through the index on (platform_code, due_at) of 0023, one descent per platform with
-- a lane (webhook_lane_platforms, a loose index scan), and each round takes every platform's share through the
-- same index in one statement, so a capped platform's due backlog is no longer passed over lane by lane (0022:
-- 10-14 ms a claim beside 100,000). A claim costs one descent per platform with a lane, due or not: 6-7 us
-- each on the development VM, 6.6 ms a claim beside 1,000 such platforms (review).

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
  -- A round's platforms and their shares; those that may take more in the next round.
  v_round text[];
  v_takes integer[];
  v_wanting text[];
  v_budget integer;
  v_take integer;
  v_place integer;
  v_got tid[];
  v_got_due timestamptz[];
  v_got_codes text[];
  -- The lanes taken, with their platform and due time.
  v_ctids tid[] := '{}';
  v_codes text[] := '{}';
  v_dues timestamptz[] := '{}';
begin
  select coalesce(array_agg(p.platform_code order by random()), '{}') into v_wanting
  from webhook_lane_platforms() p
  where p.first_due_at <= v_now;
  while v_left > 0 loop
    if v_capped_left <= 0 and cardinality(p_capped) > 0 then
      v_wanting := array(
        select u.code from unnest(v_wanting) with ordinality as u(code, place)
        where not (u.code = any (p_capped)) order by u.place);
    end if;
    exit when cardinality(v_wanting) = 0;
    -- Equal shares of what is left, the spare ones to those first in the round's order; the capped platforms'
    -- within what is left of their cap.
    v_round := v_wanting;
    v_takes := '{}';
    v_budget := v_capped_left;
    for v_place in 1 .. cardinality(v_round) loop
      v_take := v_left / cardinality(v_round)
        + case when v_place <= v_left % cardinality(v_round) then 1 else 0 end;
      if coalesce(v_round[v_place] = any (p_capped), false) then
        v_take := least(v_take, v_budget);
        v_budget := v_budget - v_take;
      end if;
      v_takes := v_takes || v_take;
    end loop;
    -- Every platform's share in one statement, the platform's lanes due by now through the index on both
    -- (0023). "= any" of the one platform rather than "=": with "=", the platform is one value to the plan, which
    -- could then read the index on due_at alone (0008) in the order asked for, passing over every other
    -- platform's lanes due earlier (38 ms a claim beside 100,000); with "= any" only the index on both gives
    -- that order. (Lanes this claim already holds are locked by it, so SKIP LOCKED would not skip them: hence
    -- the ctid.)
    select coalesce(array_agg(l.ctid order by r.place, l.due_at), '{}'),
      coalesce(array_agg(l.due_at order by r.place, l.due_at), '{}'),
      coalesce(array_agg(r.code order by r.place, l.due_at), '{}')
    into v_got, v_got_due, v_got_codes
    from unnest(v_round, v_takes) with ordinality as r(code, take, place)
    cross join lateral (
      select w.ctid, w.due_at from webhook_lanes w
      where w.platform_code collate "C" = any (array[r.code]) and w.due_at <= v_now
        and w.ctid <> all (v_ctids)
      order by w.platform_code collate "C", w.due_at
      limit r.take
      for no key update skip locked
    ) l
    where r.take > 0;
    v_ctids := v_ctids || v_got;
    v_codes := v_codes || v_got_codes;
    v_dues := v_dues || v_got_due;
    v_left := v_left - cardinality(v_got);
    v_capped_left := v_capped_left
      - (select count(*) from unnest(v_got_codes) as g(code) where g.code = any (p_capped))::integer;
    -- Next round: those that took their whole share (they may have more) or had none, those that have taken
    -- fewest first (the spare ones went to those first in this round).
    v_wanting := array(
      select r.code from unnest(v_round, v_takes) with ordinality as r(code, take, place)
      left join (select g.code, count(*) as n from unnest(v_got_codes) as g(code) group by g.code) got
        on got.code = r.code
      left join (select a.code, count(*) as n from unnest(v_codes) as a(code) group by a.code) so_far
        on so_far.code = r.code
      where r.take = coalesce(got.n, 0)
      order by coalesce(so_far.n, 0), r.place);
    -- (A round that took nothing leaves only platforms that had no share, and what is left is then shared
    -- among fewer; one whose lanes are all locked by other claims drops out.)
    exit when cardinality(v_got) = 0 and cardinality(v_wanting) = cardinality(v_round);
  end loop;
  if cardinality(v_ctids) = 0 then
    return;
  end if;
  -- In turn: each platform's first lane, in the order they fell due, then each one's second, and so on. One
  -- platform's (the usual claim of a busy worker) are in due order already: no sort on that path.
  if exists (select 1 from unnest(v_codes) as c(code) where c.code <> v_codes[1]) then
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
