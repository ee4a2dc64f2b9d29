-- A deposit's transaction id was compared byte for byte, so a chain indexer that reported one Bitcoin or EVM
-- transaction again with its (hex) hash in another letter case had it recorded, and credited, a second time.
-- Hex ids on those networks are now stored in lower case (canonicalTransactionId), and those recorded before
-- are brought to that form, so that a report of one of them again finds it. Where both forms are already
-- recorded (the double credit happened) the rows are left as they are, for the operator to resolve: the
-- unique (deposit_address, transaction_id) would refuse the second.
update fund_events f
set transaction_id = lower(f.transaction_id)
from deposit_addresses a
where a.address = f.deposit_address
  and a.network in ('BTC', 'ETH')
  and f.transaction_id ~ '^(0x)?[0-9A-Fa-f]+$'
  and f.transaction_id <> lower(f.transaction_id)
  and not exists (
    select 1 from fund_events g
    where g.deposit_address = f.deposit_address and lower(g.transaction_id) = lower(f.transaction_id)
      and g.fund_id <> f.fund_id
  );
