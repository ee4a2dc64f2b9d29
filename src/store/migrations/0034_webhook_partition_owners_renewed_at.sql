-- Two fixes to how workers share the partitions (0026), both seen in chaos runs (session 32) and a review (33):
--
-- 1. A worker counts as short of its share only while it renews: its last renewal within half the lease (8.5 s by
--    default), not for as long as its lease lasts. A worker that renewed once and then lost its database stayed
--    "short" for the whole lease (17 s): the others gave back partitions for it that it could not take, and those
--    stayed free, their lanes undelivered. Once it counts as away, the others take them. It still counts in the share
--    (the divisor) until its lease ends, so that a live worker whose renewals are slow (the database loaded) does not
--    move the share from one renewal to the next.
-- 2. A worker takes up to the share rounded down while another is short, as it gives back down to (partition-holdings.ts),
--    not rounded up: two workers at the rounded-down share each took one more and gave it back at their next renewal,
--    each give back a NOTIFY that made the other renew (hundreds of log lines a second). The partitions left over by
--    the rounding are taken once no one is short (every free one).
alter table webhook_partition_owners add column renewed_at timestamptz not null default clock_timestamp();

create or replace function webhook_lease_partitions(p_owner text, p_lease_ms integer, p_give_back smallint[], p_wanting boolean)
returns table (partitions smallint[], fair_share integer, others_short boolean)
language plpgsql volatile as $$
declare
  v_now timestamptz := clock_timestamp();
  v_until timestamptz := clock_timestamp() + p_lease_ms * interval '1 millisecond';
  v_renewing timestamptz := clock_timestamp() - p_lease_ms / 2 * interval '1 millisecond';
  v_wanting integer;
  v_share integer;
  v_held integer;
  v_short boolean;
  v_take integer;
begin
  insert into webhook_partition_owners as o (owner, seen_until, wanting, renewed_at)
  values (p_owner, v_until, p_wanting, v_now)
  on conflict (owner) do update
    set seen_until = excluded.seen_until, wanting = excluded.wanting, renewed_at = excluded.renewed_at;
  delete from webhook_partition_owners o where o.seen_until < v_now - interval '1 hour';

  update webhook_partitions p set owner = null, lease_until = null
  where p.owner = p_owner and p.lane_partition = any (p_give_back);
  update webhook_partitions p set lease_until = v_until where p.owner = p_owner;
  get diagnostics v_held = row_count;

  select count(*) into v_wanting from webhook_partition_owners o where o.seen_until > v_now and o.wanting;
  v_share := 64 / greatest(v_wanting, 1);
  select exists (
    select 1 from webhook_partition_owners o
    where o.seen_until > v_now and o.renewed_at > v_renewing and o.wanting and o.owner <> p_owner
      and (select count(*) from webhook_partitions p where p.owner = o.owner and p.lease_until > v_now) < v_share
  ) into v_short;

  if p_wanting then
    -- Up to the share while another worker is short, or every free one while none is.
    v_take := case when v_short then greatest(0, v_share - v_held) else 64 end;
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
