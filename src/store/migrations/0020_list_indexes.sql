-- svc:no-transaction
-- Indexes for the list endpoints at production volume (review at 200k balance accounts, 50k customers, 200k
-- trades, EXPLAIN ANALYZE): each of these pages read and sorted every row of the platform, or scanned the
-- whole table for a filter, on every request.
--
-- Built CONCURRENTLY, outside a transaction (see src/store/migrate.ts): a plain build blocked every write to
-- these tables (settlements, executes, deposits, onboarding) for as long as it took, about 6 s per million
-- trades (upgrade review). The indexes are the ones this migration first built in one transaction; only how
-- they are built changed, so a database that applied it that way has the same schema. Each is dropped first:
-- a build stopped halfway leaves an invalid index behind, and the file is then run again whole.
--
-- GET /accounts pages in (created_at, account_id) order within the platform: a sequential scan and a sort
-- (spilling to disk on deep pages) of all the platform's balance accounts.
drop index concurrently if exists balance_accounts_platform_created;
create index concurrently balance_accounts_platform_created on balance_accounts (platform_code, created_at, account_id);

-- GET /participants pages the platform's customers in (created_at, participant_code) order.
drop index concurrently if exists participants_customers_created;
create index concurrently participants_customers_created on participants (platform_code, created_at, participant_code)
  where kind = 'customer';

-- GET /trades?party_code= / participant_code=: a trade's parties are its owner and its counterparty (an OR
-- of the two), newest first as the list is ordered; each was a sequential scan of every trade.
drop index concurrently if exists trades_owner_time;
create index concurrently trades_owner_time on trades (platform_code, owner_participant_code, transaction_at desc, trade_id desc);
drop index concurrently if exists trades_counterparty_time;
create index concurrently trades_counterparty_time on trades (platform_code, counterparty_code, transaction_at desc, trade_id desc);
