-- svc:gives-way
-- SDK tokens expire an hour after they are issued, and every POST /client_auth_token wrote a row kept for good:
-- the table only grew (soak probe). Expired tokens are purged a day after their expiry (funding.purge_expired_tokens).
-- A funding session opened by a token keeps that token's id as its record of what opened it, no longer a reference
-- the token's row must outlive: the session is what a deposit's reference is read from, long after the token.
--
-- Dropping the key locks both tables, which the service writes in both orders: a token with `fwc` writes the token
-- then its session, a fund quote its session then (the key's check) the token table. Either order deadlocked with
-- one of them, and PostgreSQL ended the request (review): hence gives-way (src/store/migrate.ts), so that it is this
-- migration that gives up, and is tried again.
lock table client_auth_tokens, funding_sessions in access exclusive mode;
alter table funding_sessions drop constraint funding_sessions_token_jti_fkey;
