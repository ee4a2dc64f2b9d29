-- Indexes for the list endpoints at production volume (review at 200k balance accounts, 50k customers, 200k
-- trades, EXPLAIN ANALYZE): each of these pages read and sorted every row of the platform, or scanned the
-- whole table for a filter, on every request.
--
-- GET /accounts pages in (created_at, account_id) order within the platform: a sequential scan and a sort
-- (spilling to disk on deep pages) of all the platform's balance accounts.
create index balance_accounts_platform_created on balance_accounts (platform_code, created_at, account_id);

-- GET /participants pages the platform's customers in (created_at, participant_code) order.
create index participants_customers_created on participants (platform_code, created_at, participant_code)
  where kind = 'customer';

-- GET /trades?party_code= / participant_code=: a trade's parties are its owner and its counterparty (an OR
-- of the two), newest first as the list is ordered; each was a sequential scan of every trade.
create index trades_owner_time on trades (platform_code, owner_participant_code, transaction_at desc, trade_id desc);
create index trades_counterparty_time on trades (platform_code, counterparty_code, transaction_at desc, trade_id desc);
