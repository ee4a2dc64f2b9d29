-- svc_webhook_oldest_pending_age_seconds measured from a notification's commit even after an operator had
-- redelivered it, so redelivering last month's dead letters made the gauge read a month until every one of
-- them was delivered: the false alarm 0012 removed from the latency histogram. The age now runs from when
-- the notification's current round began, its commit or its latest redelivery (greatest ignores the null
-- of one never redelivered), read through an index of that time over the undelivered notifications only,
-- which replaces the one on created_at: a scrape still reads one index entry. A redelivery already rewrites
-- the row (status, redelivered_at), so the expression costs no update that was HOT before.
drop index webhook_notifications_open_created;
create index webhook_notifications_open_since
  on webhook_notifications ((greatest(created_at, redelivered_at)))
  where status in ('pending', 'retrying');
