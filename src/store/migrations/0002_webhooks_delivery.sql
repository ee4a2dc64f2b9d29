-- Webhook delivery (issue 4, wire-contract §5): per-platform endpoint configuration, the delivery state of
-- each outbox row, every attempt, and the short-lived per-resource leases that keep delivery in order.
--
-- The work itself runs on graphile-worker (DESIGN §5): one job per (platform, resource key) "lane", keyed
-- so that at most one is waiting per lane. What the queue cannot express lives here: the retry schedule of
-- each notification (next_attempt_at), per-resource order (a lane is worked by one lease holder at a time,
-- oldest notification first), and a lease that expires on its own, so a worker killed mid-delivery holds a
-- lane for the request timeout + 5 s, not for graphile-worker's 4-hour job lock.

-- One endpoint per platform (DESIGN §3: PUT /admin/platforms/{code}/webhook).
create table webhook_endpoints (
  platform_code text primary key references platforms (platform_code),
  url text not null check (length(url) between 1 and 2048),
  -- AES-256-GCM with the server key (src/lib/secret-box.ts); null = no secret, deliveries are unsigned.
  secret_ciphertext bytea,
  -- The payload types wanted; null = all of them, including types added by later versions.
  payload_types text[],
  enabled boolean not null default true,
  created_at timestamptz not null default now(),
  updated_at timestamptz not null default now()
);

-- Delivery state of each notification. Rows written before this migration start as pending, so they are
-- delivered (or skipped) like new ones rather than silently left behind.
alter table webhook_notifications
  add column status text not null default 'pending'
    check (status in ('pending', 'retrying', 'delivered', 'dead', 'skipped')),
  -- Why it is dead or skipped (e.g. "410 Gone", "retry schedule exhausted", "no webhook configured").
  add column status_reason text,
  -- When the next attempt may start (database clock); meaningful while pending or retrying.
  add column next_attempt_at timestamptz not null default now(),
  -- Every attempt ever made, across redeliveries (numbers the attempts).
  add column attempt_count integer not null default 0,
  -- Failed attempts in the current round: the position in the retry schedule; a redelivery resets it.
  add column round_attempts integer not null default 0,
  -- Replaced by every state change. A delivery result changes the state only if the token is still the one
  -- the attempt started from, so an operator's redelivery during an attempt is not overwritten by its result.
  add column state_token uuid not null default gen_random_uuid(),
  add column last_attempt_at timestamptz,
  add column delivered_at timestamptz,
  add column dead_at timestamptz;

-- The head of each lane (oldest undelivered notification of one platform and resource key).
create index webhook_notifications_undelivered
  on webhook_notifications (platform_code, resource_key, seq) where status in ('pending', 'retrying');
-- Due work, for the sweeper that revives lanes whose worker died, and the oldest-pending metric.
create index webhook_notifications_due
  on webhook_notifications (next_attempt_at) where status in ('pending', 'retrying');
create index webhook_notifications_open_seq
  on webhook_notifications (seq) where status in ('pending', 'retrying');
-- Operator listing, newest first, and the dead-letter count.
create index webhook_notifications_platform on webhook_notifications (platform_code, seq);
create index webhook_notifications_dead on webhook_notifications (platform_code, seq) where status = 'dead';

-- Every delivery attempt (DESIGN §3: time, status code, error, duration), kept with its notification.
create table webhook_attempts (
  attempt_id bigserial primary key,
  notification_id uuid not null references webhook_notifications (notification_id),
  attempt_number integer not null check (attempt_number >= 1),
  started_at timestamptz not null,
  duration_ms integer not null check (duration_ms >= 0),
  -- null when no response arrived (timeout, reset, refused).
  status_code integer,
  error text,
  outcome text not null check (outcome in ('delivered', 'failed', 'gone', 'aborted')),
  -- The lease owner that made it (host:pid:run), for diagnosing duplicates after a crash.
  worker text not null
);
create index webhook_attempts_notification on webhook_attempts (notification_id, attempt_id);

-- Why a notification is not delivered to a platform's endpoint, or null when it is deliverable: the one
-- statement of that rule, used when a notification is recorded and again when its turn comes.
create function webhook_skip_reason(p_enabled boolean, p_payload_types text[], p_payload_type text)
returns text
language sql immutable as $$
  select case
    when p_enabled is null then 'no webhook configured'
    when not p_enabled then 'webhook disabled'
    when p_payload_types is not null and not (p_payload_type = any (p_payload_types))
      then 'payload type not subscribed'
  end
$$;

-- Lane leases: a row exists only while a worker works a lane. The holder renews it before every attempt to
-- at least the request timeout + 5 s; an expired row may be taken over by any worker.
create table webhook_delivery_leases (
  platform_code text not null,
  resource_key text not null,
  owner text not null,
  claimed_at timestamptz not null,
  expires_at timestamptz not null,
  primary key (platform_code, resource_key)
);

-- Claims a lane for p_owner until now + p_lease_ms. When a live claim holds it, schedules this lane's job
-- (p_task, p_job_key) to run when that claim expires, as the fallback should the holder die, and returns
-- claimed = false. The fallback is added while the lease row is locked (ON CONFLICT locks the row even when
-- its WHERE is false), so the holder's release, which also locks the row, always comes after it and its
-- own wake-up wins.
create function webhook_claim_lease(
  p_platform text, p_resource text, p_owner text, p_lease_ms integer, p_task text, p_job_key text
) returns table (claimed boolean, expires_at timestamptz)
language plpgsql volatile as $$
declare
  v_expires timestamptz;
begin
  insert into webhook_delivery_leases as l (platform_code, resource_key, owner, claimed_at, expires_at)
  values (p_platform, p_resource, p_owner, clock_timestamp(),
          clock_timestamp() + p_lease_ms * interval '1 millisecond')
  on conflict (platform_code, resource_key) do update
    set owner = excluded.owner, claimed_at = excluded.claimed_at, expires_at = excluded.expires_at
    where l.expires_at <= clock_timestamp()
  returning l.expires_at into v_expires;
  if found then
    return query select true, v_expires;
    return;
  end if;
  select l.expires_at into v_expires
  from webhook_delivery_leases l
  where l.platform_code = p_platform and l.resource_key = p_resource;
  perform graphile_worker.add_job(
    p_task,
    json_build_object('platform_code', p_platform, 'resource_key', p_resource),
    run_at => v_expires,
    job_key => p_job_key,
    job_key_mode => 'replace'
  );
  return query select false, v_expires;
end;
$$;

-- Gives a lane back. Runs its look-up after the delete with a fresh snapshot (a volatile function in READ
-- COMMITTED takes one per statement), so a notification committed while the lease was held is seen here and
-- the lane's job is scheduled for its head: nothing waits for a lease that is no longer there.
create function webhook_release_lease(
  p_platform text, p_resource text, p_owner text, p_task text, p_job_key text
) returns timestamptz
language plpgsql volatile as $$
declare
  v_next timestamptz;
begin
  delete from webhook_delivery_leases
  where platform_code = p_platform and resource_key = p_resource and owner = p_owner;
  select n.next_attempt_at into v_next
  from webhook_notifications n
  where n.platform_code = p_platform and n.resource_key = p_resource and n.status in ('pending', 'retrying')
  order by n.seq
  limit 1;
  if v_next is not null then
    perform graphile_worker.add_job(
      p_task,
      json_build_object('platform_code', p_platform, 'resource_key', p_resource),
      run_at => greatest(v_next, now()),
      job_key => p_job_key,
      job_key_mode => 'replace'
    );
  end if;
  return v_next;
end;
$$;
