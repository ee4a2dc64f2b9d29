-- Quotes that expired without being executed are purged a day after their expiry (quotes.purge_expired, an
-- hourly job): every RFQ writes a quote, and nothing else ever reads one after it expires (an execution
-- then answers 404, wire-contract §7). This index finds them without reading the executed ones, which stay
-- with their trades (trades.quote_id references them).
create index quotes_unexecuted_expiry on quotes (expire_at) where executed_at is null;
