-- svc:no-transaction
-- The sessions not reported expired, by expiry time: the recurring sweep (funding.jobs.ts) looks among those
-- whose expiry passed a while ago for any whose expiry job used up its attempts. Partial: a session reported
-- expired leaves it.
--
-- Built CONCURRENTLY, outside a transaction (src/store/migrate.ts, as 0020): a plain build blocks every session
-- opened (tokens and fund quotes) for as long as it takes. Dropped first: a build stopped halfway leaves an
-- invalid index behind, and the file is then run again whole.
drop index concurrently if exists funding_sessions_unexpired;
create index concurrently funding_sessions_unexpired on funding_sessions (expires_at) where expired_at is null;
