-- 0017 brought hex transaction ids on Bitcoin and EVM networks to lower case, but left their prefix as sent,
-- and took `0X…` for no hex id at all: one transaction reported as `0xab…`, `ab…` and `0XAB…` was recorded,
-- and credited, three times. canonicalTransactionId now also writes a hash (64 hex digits) the way its network
-- does, `0x` first on EVM and no prefix on Bitcoin, and a shorter hex id's `0X` as `0x`. The deposits recorded
-- before are brought to that form here, as in 0017; where two of one address already come to the same form
-- (the double credit happened) they are left as they are, for the operator to resolve: the unique
-- (deposit_address, transaction_id) would refuse the second.
create function pg_temp.canonical_transaction_id(p_network text, p_id text) returns text
language sql immutable as $$
  select case
    when p_network not in ('BTC', 'ETH') or p_id !~ '^(0[xX])?[0-9A-Fa-f]+$' then p_id
    when length(regexp_replace(p_id, '^0[xX]', '')) = 64 then
      case when p_network = 'ETH' then '0x' else '' end || lower(regexp_replace(p_id, '^0[xX]', ''))
    when p_id ~ '^0[xX]' then '0x' || lower(substr(p_id, 3))
    else lower(p_id)
  end
$$;

with canonical as (
  select f.fund_id, f.deposit_address, pg_temp.canonical_transaction_id(a.network, f.transaction_id) as id
  from fund_events f
  join deposit_addresses a on a.address = f.deposit_address
  where f.transaction_id is not null
)
update fund_events f
set transaction_id = c.id
from canonical c
where f.fund_id = c.fund_id
  and f.transaction_id <> c.id
  and not exists (
    select 1 from canonical d
    where d.deposit_address = c.deposit_address and d.id = c.id and d.fund_id <> c.fund_id
  );
