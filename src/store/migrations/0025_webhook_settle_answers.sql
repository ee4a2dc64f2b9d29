-- A settle statement answered each of its items by joining them to the records its update had written: the
-- planner takes an update's output for one row, so it read every record once per item, and a batch of 100 items
-- made 10,000 comparisons: about 12 us of PostgreSQL's time per item, some 15 % of the statement (measured on
-- the development VM, settles of 100 lanes taken in turn with the two versions: medians 6.8 against 8.0 ms).
-- The records' answers are now gathered into two arrays, and each item looks its own up by its index.
--
-- And a result that was recorded is not recorded again. A settle statement that fails is sent again, each item
-- alone (src/domain/webhooks/statement-batcher.ts: so that one item's failure fails only that item). One that
-- had committed before its answer was lost (a connection dropped) then recorded its attempts a second time: one
-- more in attempt_count, the same attempt twice in the list (the state token kept the state change from
-- applying twice). A notification whose state token is already the item's new one has its record: it is left
-- as it is, and the item is answered as applied. (An attempt whose state change did not apply, an operator's
-- redelivery having come first, is not known this way: sent again so, it is listed twice.)
--
-- The settle function is restated as in 0016 but for these (a forward-only migration cannot edit 0016's text);
-- its signature and result are the same, so `create or replace` keeps it in place.

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
  v_upd_idx integer[];
  v_upd_applied boolean[];
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

  -- The records, then each item's answer from arrays: joined in the statement that wrote them, the records were
  -- read once per item (the planner takes the update's output for one row), a batch of n items costing n * n.
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
      skipped_at = case when n.state_token = i.token and i.status = 'skipped'
        then clock_timestamp() else n.skipped_at end,
      state_token = case when n.state_token = i.token then i.new_token else n.state_token end
    from unnest(v_items) i
    where n.notification_id = any (v_ids) and n.notification_id = i.id and n.state_token <> i.new_token
    returning i.idx, n.state_token = i.new_token as applied
  )
  select coalesce(array_agg(u.idx), '{}'), coalesce(array_agg(u.applied), '{}')
  into v_upd_idx, v_upd_applied
  from updated u;

  return query
  select i.idx, h.held is not null, coalesce(v_upd_applied[array_position(v_upd_idx, i.idx)],
    -- Not updated: recorded already (above), or gone (purged).
    case when i.id is not null then exists (select 1 from webhook_notifications w
      where w.notification_id = i.id and w.state_token = i.new_token) end)
  from unnest(v_items) i
  left join lateral (
    select true as held from webhook_lanes l
    where l.platform_code = i.platform_code and l.resource_key = i.resource_key and l.owner = p_owner
    limit 1
  ) h on true;

  -- Last, so that the releases see the records.
  if v_platforms is not null then
    perform webhook_release_lanes(v_platforms, v_resources, p_owner);
  end if;
end;
$$;
