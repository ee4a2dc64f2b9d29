-- svc:no-transaction
-- The unsettled trades, by when they entered their state: the recurring sweep (trades.jobs.ts) looks among
-- them for any whose next settlement step is long overdue (its job used up its attempts). Partial: a settled
-- trade leaves it, so it stays as small as the trades under way.
--
-- Built CONCURRENTLY, outside a transaction (src/store/migrate.ts, as 0020): a plain build blocks every trade
-- booked for as long as it takes. Dropped first: a build stopped halfway leaves an invalid index behind.
drop index concurrently if exists trades_unsettled_updated;
create index concurrently trades_unsettled_updated on trades (updated_at) where trade_state <> 'terminated';
