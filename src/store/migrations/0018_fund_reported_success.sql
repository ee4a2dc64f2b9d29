-- A deposit report's own success flag. `success` says whether the deposit was credited, which is false both
-- for a report of a failed transfer and for a successful one this service refused (the participant may no
-- longer act for the account), so a replay check on it could not tell a report of success after a report of
-- failure, for one transaction, from a replay: the second answered 200 with the failed event, credited
-- nothing and sent nothing. Null: recorded before this migration (such a replay is not checked for it).
alter table fund_events add column reported_success boolean;
