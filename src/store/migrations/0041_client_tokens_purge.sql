-- svc:no-transaction
-- SDK tokens expire an hour after they are issued, and every POST /client_auth_token wrote a row kept for good:
-- the table only grew (soak probe). Expired tokens are purged a day after their expiry (funding.purge_expired_tokens),
-- oldest first along the expiry index built here (with the id: where a run is in its walk). A funding session
-- opened by a token outlives it: the purge clears the session's token_jti, which a token session had to have.
--
-- The foreign key stays: dropping it must lock both tables, which the service writes in both orders (an fwc token:
-- the token, then its session; a fund quote: its session, then the key's check of the token table), so the drop
-- deadlocked with one or the other, or starved waiting for a moment when neither was written (review). This locks
-- funding_sessions alone, for a moment; the check is validated after, without blocking writes. Each statement is
-- safe to run again.
alter table funding_sessions
  drop constraint if exists funding_sessions_check,
  drop constraint if exists funding_sessions_token_source,
  add constraint funding_sessions_token_source check (token_jti is null or source = 'client_auth_token') not valid;
alter table funding_sessions validate constraint funding_sessions_token_source;
-- Built CONCURRENTLY (src/store/migrate.ts, as 0030): a plain build blocks every token issued for as long as it takes.
-- Dropped first: a build stopped halfway leaves an invalid index behind.
drop index concurrently if exists client_auth_tokens_expiry;
create index concurrently client_auth_tokens_expiry on client_auth_tokens (expires_at, jti);
