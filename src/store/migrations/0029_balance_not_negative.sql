-- svc:no-transaction
-- No balance below zero, held by the database as well as by the ledger (balances.service.ts refuses every
-- debit that would take one there): a code path that forgot the check, or a correction made by hand, fails
-- rather than leaving a customer owing what the platform never lent.
--
-- Added NOT VALID (an instant change under a brief exclusive lock, bounded by SVC_MIGRATION_LOCK_TIMEOUT_MS),
-- then validated in a statement of its own, which reads every row without holding up writes. Dropped first, so
-- the file can be run again whole.
alter table balance_accounts drop constraint if exists balance_accounts_not_negative;
alter table balance_accounts add constraint balance_accounts_not_negative check (balance >= 0) not valid;
alter table balance_accounts validate constraint balance_accounts_not_negative;
