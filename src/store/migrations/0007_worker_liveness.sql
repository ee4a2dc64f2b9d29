-- Worker liveness: graphile-worker keeps a job locked for 4 hours when the process that took it dies
-- (SIGKILL, OOM, a lost machine). Each worker process records a heartbeat for its graphile worker ids;
-- any worker process unlocks jobs held by ids whose heartbeat has gone stale, so a killed worker's job
-- is picked up again within seconds and a committed change is never left without its follow-up work.
create table worker_heartbeats (
  worker_id text primary key,
  hostname text not null,
  pid integer not null,
  seen_at timestamptz not null default now()
);
create index worker_heartbeats_seen on worker_heartbeats (seen_at);
