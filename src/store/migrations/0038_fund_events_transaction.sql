-- svc:no-transaction
-- GET /admin/deposits?transaction_id=: support finds a deposit by its transaction hash alone, on any address of any
-- platform. The unique (deposit_address, transaction_id) index leads with the address, so the lookup read every
-- fund event.
--
-- Built CONCURRENTLY, outside a transaction (src/store/migrate.ts, as 0030): a plain build blocks every deposit
-- recorded for as long as it takes. Dropped first: a build stopped halfway leaves an invalid index behind.
drop index concurrently if exists fund_events_transaction;
create index concurrently fund_events_transaction on fund_events (transaction_id) where transaction_id is not null;
