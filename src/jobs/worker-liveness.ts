import os from 'node:os';
import type pg from 'pg';

/**
 * Frees jobs held by dead worker processes. graphile-worker leaves a job locked for 4 hours when its
 * process dies mid-job; that would stall a tenant change, a settlement or a webhook lane for hours.
 * Each process heartbeats the ids it locks jobs with (its worker pool's); every process periodically
 * unlocks (with the library's own `force_unlock_workers`) the jobs of ids that are locked, not heartbeating
 * and not ours. Each periodic run waits for the one before: a database that stops answering would otherwise
 * pile a statement a period onto the pool.
 */
export interface WorkerLivenessOptions {
  pool: pg.Pool;
  /** Heartbeat period. */
  heartbeatMs?: number;
  /** A worker id whose heartbeat is older than this is considered dead. */
  staleMs?: number;
  /** How often to look for jobs of dead workers. */
  reapMs?: number;
  /** Tasks always enqueued with a job key: a job of theirs without one was superseded (see reap). */
  keyedTasks?: readonly string[];
  onError?: (error: unknown) => void;
}

export class WorkerLiveness {
  private readonly ids = new Set<string>();
  private timers: NodeJS.Timeout[] = [];
  private readonly heartbeatMs: number;
  private readonly staleMs: number;
  private readonly reapMs: number;

  constructor(private readonly options: WorkerLivenessOptions) {
    this.heartbeatMs = options.heartbeatMs ?? 5_000;
    this.staleMs = options.staleMs ?? 20_000;
    this.reapMs = options.reapMs ?? 10_000;
  }

  add(workerId: string): void {
    this.ids.add(workerId);
    this.heartbeat().catch(this.report);
  }

  remove(workerId: string): void {
    this.ids.delete(workerId);
    this.options.pool
      .query('delete from worker_heartbeats where worker_id = $1', [workerId])
      .catch(this.report);
  }

  start(): void {
    const every = (ms: number, fn: () => Promise<unknown>) => {
      let running = false;
      const timer = setInterval(() => {
        if (running) return;
        running = true;
        void fn()
          .catch(this.report)
          .finally(() => (running = false));
      }, ms);
      timer.unref();
      this.timers.push(timer);
    };
    every(this.heartbeatMs, () => this.heartbeat());
    every(this.reapMs, () => this.reap());
    void this.reap().catch(this.report);
  }

  async stop(): Promise<void> {
    for (const timer of this.timers) clearInterval(timer);
    this.timers = [];
    const ids = [...this.ids];
    this.ids.clear();
    if (ids.length)
      await this.options.pool
        .query('delete from worker_heartbeats where worker_id = any($1)', [ids])
        .catch(this.report);
  }

  async heartbeat(): Promise<void> {
    if (this.ids.size === 0) return;
    await this.options.pool.query(
      `insert into worker_heartbeats (worker_id, hostname, pid, seen_at)
       select id, $2, $3, now() from unnest($1::text[]) as id
       on conflict (worker_id) do update set seen_at = excluded.seen_at`,
      [[...this.ids], os.hostname(), process.pid],
    );
  }

  /**
   * Unlocks jobs of workers that are neither ours nor heartbeating; returns the ids it freed. Also drops what
   * dead processes leave that nothing else would: their heartbeat rows, and jobs superseded while they ran
   * them (add_job, replacing a keyed job that is running, takes the key off it and sets its attempts to the
   * maximum, so that it is never retried; unlocked after its process died, it stayed for good, counted as
   * failed with no error).
   */
  async reap(): Promise<string[]> {
    const { rows } = await this.options.pool.query<{ locked_by: string }>(
      `select distinct j.locked_by
         from graphile_worker.jobs j
        where j.locked_by is not null
          and not (j.locked_by = any($1::text[]))
          and not exists (
            select 1 from worker_heartbeats h
             where h.worker_id = j.locked_by and h.seen_at > now() - make_interval(secs => $2::double precision / 1000))`,
      [[...this.ids], this.staleMs],
    );
    const dead = rows.map((r) => r.locked_by);
    if (dead.length) {
      await this.options.pool.query('select graphile_worker.force_unlock_workers($1::text[])', [dead]);
      await this.options.pool.query('delete from worker_heartbeats where worker_id = any($1)', [dead]);
    }
    if (this.options.keyedTasks?.length) {
      await this.options.pool.query(
        // The task ids first: joined, the planner scanned the jobs once per keyed task (review).
        `delete from graphile_worker._private_jobs j
          where j.task_id = any (array(
              select t.id from graphile_worker._private_tasks t where t.identifier = any($1::text[])))
            and j.key is null and j.locked_at is null and j.attempts >= j.max_attempts and j.last_error is null`,
        [this.options.keyedTasks],
      );
    }
    // Heartbeats of processes gone for ten times the stale age.
    await this.options.pool.query(
      `delete from worker_heartbeats
        where not (worker_id = any($1::text[])) and seen_at < now() - make_interval(secs => $2::double precision * 10 / 1000)`,
      [[...this.ids], this.staleMs],
    );
    return dead;
  }

  private readonly report = (error: unknown) => this.options.onError?.(error);
}
