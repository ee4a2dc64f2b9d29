-- The lane functions of migration 0008 plan their statements once per connection, not on every call.
--
-- 0008 made them plan every call (plan_cache_mode = force_custom_plan), because generic plans cached while
-- the tables were small (a new database, a quiet night) had chosen sequential scans, which cost more and
-- more as the tables grew. Planning was then the larger part of a batch's cost: on a 10- to 50-item batch,
-- PostgreSQL spent about a quarter less CPU per delivery with cached plans (measured by claiming and
-- settling 8,000 notifications in batches of 20, five times each way, on the same server).
--
-- Every statement in these functions finds its rows through a key, a ctid or the lanes' due index, so the
-- plan that is right for them does not depend on the tables' size: forbidding sequential scans
-- (enable_seqscan = off, which only makes them the last resort) makes the generic plan that plan whatever
-- the statistics said when it was made, and force_generic_plan keeps it.
alter function webhook_claim_lanes(text, integer, integer, integer)
  set plan_cache_mode = force_generic_plan set enable_seqscan = off;
alter function webhook_release_lanes(text[], text[], text)
  set plan_cache_mode = force_generic_plan set enable_seqscan = off;
alter function webhook_settle_lanes(text, integer, jsonb)
  set plan_cache_mode = force_generic_plan set enable_seqscan = off;
