-- svc:no-transaction
-- The list filters a platform uses to find a few rows among many, each through an index that gives them in the
-- listing's order (as 0020 did for the unfiltered pages and the party filter): without one, the page and its count
-- read and filtered every row of the platform (review at volume, 450k trades of one platform: an account label or
-- an asset matching little, 110-190 ms; a fund asset among 250k fund events, 76 ms; an asset among 200k balance
-- accounts, 72 ms). An asset is a trade's underlying or its quoted currency: one index each, which the planner
-- combines.
--
-- Built CONCURRENTLY, outside a transaction (src/store/migrate.ts, as 0020): a plain build blocks every write of
-- the table (trades, deposits, balances) for as long as it takes. Dropped first: a build stopped halfway leaves an
-- invalid index behind, and the file is then run again whole.
drop index concurrently if exists trades_label_time;
create index concurrently trades_label_time on trades (platform_code, account_label, transaction_at desc, trade_id desc);
drop index concurrently if exists trades_underlying_time;
create index concurrently trades_underlying_time on trades (platform_code, underlying, transaction_at desc, trade_id desc);
drop index concurrently if exists trades_quoted_time;
create index concurrently trades_quoted_time on trades (platform_code, quoted_currency, transaction_at desc, trade_id desc);
drop index concurrently if exists fund_events_asset;
create index concurrently fund_events_asset on fund_events (platform_code, fund_asset, deposit_timestamp desc, seq desc);
drop index concurrently if exists balance_accounts_asset_created;
create index concurrently balance_accounts_asset_created on balance_accounts (platform_code, asset, created_at, account_id);
