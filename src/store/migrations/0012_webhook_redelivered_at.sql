-- The delivery latency histogram (svc_webhook_delivery_latency_seconds) measured from a notification's
-- commit even when an operator had redelivered it: one redelivery of last month's notifications filled its
-- top bucket with month-old "latencies", enough to set off any alert on it. A redelivery now records when it
-- was made, and the claim gives the worker when the notification's current round began: its commit, or its
-- latest redelivery, as a column added at the end of its result (a worker of the version before reads its
-- columns by name, so one still running during a rolling deploy goes on working). A function's result type
-- cannot be changed in place, so it is dropped and created again, as in 0011 but for that column; the
-- migration runs in one transaction, so no worker sees it missing.

alter table webhook_notifications add column redelivered_at timestamptz;

drop function webhook_claim_lanes(text, integer, integer, integer);

create function webhook_claim_lanes(p_owner text, p_limit integer, p_lease_ms integer,
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
    order by c.platform_code, c.resource_key, n.seq;
end;
$$;
