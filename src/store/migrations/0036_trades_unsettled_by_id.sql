-- svc:no-transaction
-- The settlement sweep (trades.jobs.ts) goes on where its last run stopped, by (updated_at, trade_id): from the
-- oldest each time, 500 trades that could not settle held every newer stalled trade back. The id makes the order
-- total, so a run resumes after the last trade it took even among trades that entered their state in the same
-- millisecond, and the index gives that order without a sort. It replaces 0030's (updated_at) index, which it
-- covers.
--
-- Built CONCURRENTLY, outside a transaction (src/store/migrate.ts, as 0030): a plain build blocks every trade
-- booked for as long as it takes. Dropped first: a build stopped halfway leaves an invalid index behind.
drop index concurrently if exists trades_unsettled_updated_id;
create index concurrently trades_unsettled_updated_id on trades (updated_at, trade_id)
  where trade_state <> 'terminated';
drop index concurrently if exists trades_unsettled_updated;
