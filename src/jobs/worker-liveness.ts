import os from 'node:os';
import type pg from 'pg';
import { createFailureLog, type FailureLog } from '../lib/failure-log.ts';
import type { Log } from '../lib/log.ts';
import { within } from '../lib/within.ts';

/** How long `stop` waits for the heartbeats and reaps under way. */
const STOP_WAIT_MS = 5_000;

/**
 * Frees jobs held by dead worker processes. graphile-worker leaves a job locked for 4 hours when its
 * process dies mid-job; that would stall a tenant change, a settlement or a webhook lane for hours.
 * Each process heartbeats the ids it locks jobs with (its worker pool's); every process periodically
 * unlocks (with the library's own `force_unlock_workers`) the jobs of ids that are locked, not heartbeating
 * and not ours. Each periodic run waits for the one before: a database that stops answering would otherwise
 * pile a statement a period onto the pool. `stop` waits for the statements under way: the process ends the pool
 * next, and a reap cut short there sent its next statement to an ended pool (CI: a warning logged at a clean
 * shutdown).
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
  /**
   * How long a job of ours may stay locked once it is no longer running here (its completion statement under way)
   * before it counts as orphaned and is unlocked (see reap). 30 s.
   */
  orphanGraceMs?: number;
  /**
   * Where the failures of heartbeats and reaps are logged, as everything a worker tries again while the database is
   * away: the first with its error, then every 30 s while they go on, and the return (src/lib/failure-log.ts). One
   * line with its stack at each try was two lines every 5 s through an outage (probe).
   */
  log?: Log;
  /** Each failure, as it happens. */
  onError?: (error: unknown) => void;
  /** Jobs of this process found locked though it was not running them, and unlocked to run again. */
  onOrphans?: (jobIds: string[]) => void;
}

export class WorkerLiveness {
  private readonly ids = new Set<string>();
  /** The jobs this process is running (graphile-worker's job:start, until job:complete). */
  private readonly running = new Set<string>();
  /** Jobs that ended here and whose completion statement was sent, by when they ended (performance.now()). */
  private readonly finished = new Map<string, number>();
  private readonly orphanGraceMs: number;
  private timers: NodeJS.Timeout[] = [];
  /** Heartbeats, reaps and heartbeat deletes under way (never rejecting): `stop` waits for them. */
  private readonly inFlight = new Set<Promise<void>>();
  private stopped = false;
  private readonly heartbeatMs: number;
  private readonly staleMs: number;
  private readonly reapMs: number;
  private readonly failures: FailureLog | null;

  constructor(private readonly options: WorkerLivenessOptions) {
    this.failures = options.log
      ? createFailureLog(
          options.log,
          {
            failed: 'worker liveness check failed',
            stillFailing: 'worker liveness check still failing',
            recovered: 'worker liveness check works again',
          },
          { level: 'warn' },
        )
      : null;
    this.heartbeatMs = options.heartbeatMs ?? 5_000;
    this.staleMs = options.staleMs ?? 20_000;
    this.reapMs = options.reapMs ?? 10_000;
    this.orphanGraceMs = options.orphanGraceMs ?? 30_000;
  }

  /** A job of this process started (graphile-worker's `job:start`). */
  jobStarted(jobId: string): void {
    this.running.add(jobId);
  }

  /** A job of this process ended and its completion or failure is being recorded (`job:complete`). */
  jobFinished(jobId: string): void {
    this.running.delete(jobId);
    this.finished.set(jobId, performance.now());
  }

  add(workerId: string): void {
    this.ids.add(workerId);
    void this.track(this.heartbeat());
  }

  remove(workerId: string): void {
    this.ids.delete(workerId);
    void this.track(
      this.options.pool.query('delete from worker_heartbeats where worker_id = $1', [workerId]),
    );
  }

  /** Reports `work`'s failure, and keeps it in `inFlight` until it has settled. */
  private track(work: Promise<unknown>): Promise<void> {
    const done: Promise<void> = work
      .then(() => this.failures?.succeeded(), this.report)
      .finally(() => this.inFlight.delete(done));
    this.inFlight.add(done);
    return done;
  }

  start(): void {
    const every = (ms: number, fn: () => Promise<unknown>) => {
      let running = false;
      const timer = setInterval(() => {
        if (running || this.stopped) return;
        running = true;
        void this.track(fn()).finally(() => (running = false));
      }, ms);
      timer.unref();
      this.timers.push(timer);
    };
    every(this.heartbeatMs, () => this.heartbeat());
    every(this.reapMs, () => this.reap());
    void this.track(this.reap());
  }

  async stop(): Promise<void> {
    this.stopped = true;
    for (const timer of this.timers) clearInterval(timer);
    this.timers = [];
    // Bounded: the pool's statements are not (a database that stops answering would hold the stop for ever).
    await within(Promise.all(this.inFlight), STOP_WAIT_MS).catch(() =>
      this.report(new Error(`stop: heartbeats or reaps still under way after ${STOP_WAIT_MS} ms`)),
    );
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
    await this.unlockOrphans();
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

  /**
   * Unlocks the jobs locked by this process's own ids that it is not running: graphile-worker records a job's end
   * without awaiting it, and when that statement fails (the database dropped the connection mid-job) the job stays
   * locked by a live, heartbeating process, which no reaper frees, for 4 hours (review: a settlement and an account
   * creation stalled so). A job is left alone while it runs, for orphanGraceMs after it ended (its statement may be
   * under way), and, never seen to start, for orphanGraceMs after it was locked (the moment between its claim and
   * `job:start`). graphile-worker has no call to unlock one job: its `force_unlock_workers` frees every job of an id,
   * running ones included; this is that function's statement for these jobs (the tables of 0.17, pinned).
   */
  private async unlockOrphans(): Promise<void> {
    if (this.ids.size === 0) return;
    const { rows } = await this.options.pool.query<{ id: string; locked_ms: number }>(
      `select j.id::text, extract(epoch from now() - j.locked_at)::float8 * 1000 as locked_ms
         from graphile_worker._private_jobs j
        where j.locked_by = any($1::text[])`,
      [[...this.ids]],
    );
    const now = performance.now();
    const lockedHere = new Set(rows.map((row) => row.id));
    // Ended, and no longer locked: recorded. Only those still locked are kept in mind.
    for (const id of this.finished.keys()) if (!lockedHere.has(id)) this.finished.delete(id);
    const orphans = rows
      .filter(({ id, locked_ms }) => {
        if (this.running.has(id)) return false;
        const endedAt = this.finished.get(id);
        return endedAt === undefined ? locked_ms >= this.orphanGraceMs : now - endedAt >= this.orphanGraceMs;
      })
      .map(({ id }) => id);
    if (orphans.length === 0) return;
    await this.options.pool.query(
      `with freed as (
         update graphile_worker._private_jobs j set locked_at = null, locked_by = null
          where j.id = any($1::bigint[]) and j.locked_by = any($2::text[])
          returning j.job_queue_id)
       update graphile_worker._private_job_queues q set locked_at = null, locked_by = null
        where q.id in (select job_queue_id from freed) and q.locked_by = any($2::text[])`,
      [orphans, [...this.ids]],
    );
    for (const id of orphans) this.finished.delete(id);
    this.options.onOrphans?.(orphans);
  }

  private readonly report = (error: unknown) => {
    this.failures?.failed(error);
    this.options.onError?.(error);
  };
}
