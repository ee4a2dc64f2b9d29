-- svc:no-transaction
-- The index through which a claim finds the platforms with due lanes and takes each one's share (0024): the
-- platform, then due_at, so that a platform's due lanes are one range, whatever other platforms have due.
--
-- In the "C" collation, which only the statements of 0024 ask for, as the undelivered index of 0011: in the
-- default one, the plans of the statements that find a lane by its key (release, settle, renew), made while
-- the table was nearly empty, took it instead of the primary key (both begin with the platform), and then read
-- every lane of the platform for each lane they looked up (test/integration/webhook-lane-plans.test.ts).
--
-- Built CONCURRENTLY, outside a transaction (src/store/migrate.ts, as 0020): a plain build blocks every lane
-- write, so every transaction that records a notification, for as long as it takes. Dropped first: a build
-- stopped halfway leaves an invalid index behind, and the file is then run again whole.
--
-- It is beside the index on due_at alone (0008), which the dispatcher's next-due time reads in one descent,
-- a worker of the version before's too during a deploy: every write of a lane's due_at pays for one more
-- index entry.
drop index concurrently if exists webhook_lanes_platform_due;
create index concurrently webhook_lanes_platform_due on webhook_lanes (platform_code collate "C", due_at);
