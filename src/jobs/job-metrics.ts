import { sql } from 'kysely';
import { Gauge, type Registry } from 'prom-client';
import { createScrapeCache, scrapeAgeGauge } from '../lib/scrape-cache.ts';
import type { Db } from '../store/database.ts';

/**
 * The job queue's depth in /metrics (DESIGN §6, README "Operations"): graphile-worker's jobs (settlement
 * steps, tenant changes, account creation, funding session expiry, the hourly purges) by task and state,
 * read from the database at scrape time, so every instance shows the same global numbers:
 * - `ready`: due and waiting for a worker (a backlog that grows here means too few workers, or none);
 * - `scheduled`: due later (a settlement step, a session's expiry, a retry's backoff);
 * - `running`: locked by a worker now;
 * - `failed`: out of attempts, kept by graphile-worker for an operator to look at.
 */
const JOB_STATES = ['ready', 'scheduled', 'running', 'failed'] as const;

interface JobCount {
  task: string;
  state: (typeof JOB_STATES)[number];
  n: number;
}

function countJobs(db: Db): Promise<JobCount[]> {
  // graphile-worker's public `jobs` view; a job locked for more than its 4-hour lock is free again.
  return sql<JobCount>`
    select task_identifier as task,
      case when locked_at is not null and locked_at > now() - interval '4 hours' then 'running'
        when attempts >= max_attempts then 'failed'
        when run_at > now() then 'scheduled'
        else 'ready' end as state,
      count(*)::int as n
    from graphile_worker.jobs
    group by 1, 2`
    .execute(db)
    .then((r) => r.rows);
}

/** `tasks`: every task of the task list, shown in every state even without jobs. */
export function registerJobMetrics(registry: Registry, db: Db, tasks: readonly string[]): void {
  const counts = createScrapeCache(() => countJobs(db), { cacheMs: 1_000, waitMs: 1_000 });
  registry.registerMetric(
    new Gauge({
      name: 'svc_jobs',
      help: 'Background jobs by task and state (ready: due and waiting for a worker; scheduled; running; failed: out of attempts)',
      labelNames: ['task', 'state'],
      registers: [],
      async collect() {
        const current = await counts.latest();
        if (!current) return;
        // Every task gets all four states, so a task or state that empties shows 0 rather than vanishing (an
        // alert on a series that is gone does not fire); a task with jobs but no longer in the list shows too.
        this.reset();
        for (const task of new Set([...tasks, ...current.value.map((c) => c.task)]))
          for (const state of JOB_STATES) this.set({ task, state }, 0);
        for (const { task, state, n } of current.value) this.set({ task, state }, n);
      },
    }),
  );
  registry.registerMetric(scrapeAgeGauge('svc_jobs_stats_age_seconds', 'the svc_jobs numbers', counts));
}
