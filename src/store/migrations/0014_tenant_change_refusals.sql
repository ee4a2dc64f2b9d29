-- A tenant change can be settled without taking effect. An add whose participant came to hold balances of
-- its own under the account's label while the add was pending (a deposit, a trade or an operator credit to
-- it, which acted for the participant itself until then) is refused when the job reaches it: as a tenant its
-- own funds under that label would be out of its reach, which is why such an add is refused when it is
-- requested (409). A removal that follows a refused add has no tenancy to end, and is refused too.
--
-- applied_at stays "settled at" (so neither is pending any more, and the indexes of 0003 hold); a refused
-- change has its reason here, and is no tenancy's history: a participant whose add was refused is not a
-- former tenant.
alter table tenant_changes add column refused_reason text;
