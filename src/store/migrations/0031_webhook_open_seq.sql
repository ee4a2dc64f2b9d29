-- svc:no-transaction
-- The undelivered notifications in seq order, for a worker's read after its cursor (lane-reads.repository.ts,
-- readAfter): the next few hundred after the cursor, found in order and no further. Without it the read, planned
-- on statistics taken while nothing was pending (as after any quiet hour), went through another partial index
-- whole and sorted it: every read of a backlog read all of the backlog, so a backlog of 40,000 cost PostgreSQL
-- 76 µs of CPU a notification to read, against 7 with it (bench/webhook-reads.bench.ts).
--
-- `seq > 0` (every seq is) makes it an index only a query that says so can use: the read's other part, which
-- finds late commits by their txid, must go through the txid index; planned on the same statistics, it took this
-- one, read whole, as just as cheap.
--
-- Built CONCURRENTLY, outside a transaction (src/store/migrate.ts, as 0020): a plain build blocks every
-- notification recorded for as long as it takes. Dropped first: a build stopped halfway leaves an invalid index.
drop index concurrently if exists webhook_notifications_open_seq;
create index concurrently webhook_notifications_open_seq on webhook_notifications (seq)
  where status in ('pending', 'retrying') and seq > 0;
