-- svc:no-transaction
-- The purge of SDK tokens a day past their expiry (0041) walks them by expiry, oldest first.
--
-- Built CONCURRENTLY, outside a transaction (src/store/migrate.ts, as 0030): a plain build blocks every token
-- issued for as long as it takes. Dropped first: a build stopped halfway leaves an invalid index behind.
drop index concurrently if exists client_auth_tokens_expiry;
create index concurrently client_auth_tokens_expiry on client_auth_tokens (expires_at);
