import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import pg from 'pg';
import { enqueueJob } from '../../src/jobs/enqueue.ts';
import { WorkerLiveness } from '../../src/jobs/worker-liveness.ts';
import { startWorker } from '../../src/jobs/worker-runtime.ts';
import { createLogger } from '../../src/main/logger.ts';
import type { Store } from '../../src/store/database.ts';
import { createTestPool, createTestStore, type TestStore } from '../helpers/database.ts';
import { eventually } from '../helpers/service-process.ts';
import { startTcpProxy } from '../helpers/tcp-proxy.ts';

let testStore: TestStore | undefined;
let store: Store;
before(async () => {
  testStore = await createTestStore();
  store = testStore.store;
});
after(() => testStore?.close());

async function lockAs(task: string, workerId: string): Promise<void> {
  // What a worker process leaves behind when it is killed mid-job: the job stays locked by its id.
  await store.pool.query(
    `update graphile_worker._private_jobs j set locked_by = $2, locked_at = now()
       from graphile_worker._private_tasks t where t.id = j.task_id and t.identifier = $1`,
    [task, workerId],
  );
}

async function lockedBy(task: string): Promise<string | null> {
  const { rows } = await store.pool.query<{ locked_by: string | null }>(
    'select locked_by from graphile_worker.jobs where task_identifier = $1',
    [task],
  );
  return rows[0]?.locked_by ?? null;
}

test('a job locked by a dead worker is released and run, not left for 4 hours', async () => {
  await enqueueJob(store.db, 'liveness_probe', { n: 1 });
  await lockAs('liveness_probe', 'worker-killed-by-sigkill');
  let ran = 0;
  let resolveRan!: () => void;
  const done = new Promise<void>((resolve) => (resolveRan = resolve));
  const runner = await startWorker({
    pool: store.pool,
    taskList: {
      liveness_probe: async () => {
        ran++;
        resolveRan();
      },
    },
    concurrency: 1,
    pollIntervalMs: 50,
    logger: createLogger('silent'),
  });
  try {
    await Promise.race([
      done,
      new Promise((_, reject) => setTimeout(() => reject(new Error('job never ran')), 15_000)),
    ]);
    assert.equal(ran, 1);
  } finally {
    await runner.stop();
  }
});

test('a job locked by a live worker (fresh heartbeat) is left alone', async () => {
  await enqueueJob(store.db, 'liveness_busy', { n: 2 });
  await lockAs('liveness_busy', 'worker-alive');
  const other = new WorkerLiveness({ pool: store.pool });
  other.add('worker-alive');
  await other.heartbeat();
  const reaper = new WorkerLiveness({ pool: store.pool });
  assert.deepEqual(await reaper.reap(), []);
  assert.equal(await lockedBy('liveness_busy'), 'worker-alive');
  // Once its heartbeat is stale it is dead: the reaper frees the job.
  await store.pool.query(
    "update worker_heartbeats set seen_at = now() - interval '1 minute' where worker_id = 'worker-alive'",
  );
  assert.deepEqual(await reaper.reap(), ['worker-alive']);
  assert.equal(await lockedBy('liveness_busy'), null);
});

test("a job a live process is running is not unlocked by another process's reaper (jobs are locked by the pool's id)", async () => {
  // graphile-worker locks jobs with its worker pool's id; the process heartbeated its workers' ids instead,
  // so every reaper took a running job for a dead process's and unlocked it: a job running longer than a
  // reap period was started again beside itself.
  await enqueueJob(store.db, 'liveness_long', { n: 3 });
  let runs = 0;
  let release!: () => void;
  const released = new Promise<void>((resolve) => (release = resolve));
  let finished!: () => void;
  const done = new Promise<void>((resolve) => (finished = resolve));
  const runner = await startWorker({
    pool: store.pool,
    taskList: {
      liveness_long: async () => {
        runs++;
        await released;
        finished();
      },
    },
    concurrency: 1,
    pollIntervalMs: 50,
    logger: createLogger('silent'),
  });
  try {
    const holder = await eventually(async () => {
      const id = await lockedBy('liveness_long');
      if (id === null) return undefined;
      const { rowCount } = await store.pool.query('select 1 from worker_heartbeats where worker_id = $1', [
        id,
      ]);
      return rowCount ? id : undefined;
    });
    const otherProcess = new WorkerLiveness({ pool: store.pool });
    assert.deepEqual(await otherProcess.reap(), [], `${holder} is alive`);
    assert.equal(await lockedBy('liveness_long'), holder);
    release();
    await done;
    assert.equal(runs, 1);
  } finally {
    release();
    await runner.stop();
  }
});

test('the reaper drops what dead processes leave: superseded keyed jobs and old heartbeats', async () => {
  // A keyed job replaced while it ran (add_job takes its key off and sets its attempts to the maximum) and
  // whose process then died: unlocked, it was never run nor deleted, counted as failed with no error.
  await enqueueJob(store.db, 'liveness_keyed', { step: 1 }, { jobKey: 'liveness:k' });
  await lockAs('liveness_keyed', 'worker-died-mid-job');
  await enqueueJob(store.db, 'liveness_keyed', { step: 2 }, { jobKey: 'liveness:k' });
  await store.pool.query(
    `insert into worker_heartbeats (worker_id, hostname, pid, seen_at)
     values ('pool-long-gone', 'h', 1, now() - interval '1 hour')`,
  );
  const reaper = new WorkerLiveness({ pool: store.pool, keyedTasks: ['liveness_keyed'] });
  assert.deepEqual(await reaper.reap(), ['worker-died-mid-job']);
  const { rows } = await store.pool.query<{ key: string | null; payload: { step: number } }>(
    `select j.key, j.payload from graphile_worker._private_jobs j
       join graphile_worker._private_tasks t on t.id = j.task_id where t.identifier = 'liveness_keyed'`,
  );
  assert.deepEqual(rows, [{ key: 'liveness:k', payload: { step: 2 } }], 'the newer job of the key is left');
  const gone = await store.pool.query("select 1 from worker_heartbeats where worker_id = 'pool-long-gone'");
  assert.equal(gone.rowCount, 0);
});

test('a job this live process no longer runs, whose end could not be recorded, is unlocked by its own reaper after a grace', async () => {
  // graphile-worker records a job's end without awaiting it; when the database drops the connection then, the job
  // stays locked by a live, heartbeating process that no reaper frees (review: a settlement stalled for hours).
  const own = 'pool-alive-but-lost-a-completion';
  const jobIds: Record<string, string> = {};
  for (const task of ['liveness_orphan', 'liveness_running', 'liveness_just_ended']) {
    await enqueueJob(store.db, task, { task });
    await lockAs(task, own);
    const { rows } = await store.pool.query<{ id: string }>(
      'select id::text from graphile_worker.jobs where task_identifier = $1',
      [task],
    );
    jobIds[task] = rows[0]!.id;
  }
  // Locked a minute ago: long past the moment between a claim and its job:start.
  await store.pool.query(
    "update graphile_worker._private_jobs set locked_at = now() - interval '1 minute' where locked_by = $1",
    [own],
  );
  const orphaned: string[][] = [];
  const liveness = new WorkerLiveness({ pool: store.pool, onOrphans: (ids) => orphaned.push(ids) });
  liveness.add(own);
  liveness.jobStarted(jobIds.liveness_running!);
  liveness.jobStarted(jobIds.liveness_just_ended!);
  liveness.jobFinished(jobIds.liveness_just_ended!); // its end being recorded: within the grace
  try {
    await liveness.reap();
    assert.deepEqual(orphaned, [[jobIds.liveness_orphan]]);
    assert.equal(await lockedBy('liveness_orphan'), null, 'the orphan is free to run again');
    assert.equal(await lockedBy('liveness_running'), own, 'a job running here is left alone');
    assert.equal(
      await lockedBy('liveness_just_ended'),
      own,
      'a job whose end is being recorded is left alone',
    );
  } finally {
    await liveness.stop();
  }
  // Past the grace, an ended job still locked is an orphan too.
  const later = new WorkerLiveness({ pool: store.pool, orphanGraceMs: 0 });
  later.add(own);
  later.jobStarted(jobIds.liveness_running!);
  later.jobStarted(jobIds.liveness_just_ended!);
  later.jobFinished(jobIds.liveness_just_ended!);
  try {
    await later.reap();
    assert.equal(await lockedBy('liveness_just_ended'), null);
    assert.equal(await lockedBy('liveness_running'), own);
  } finally {
    await later.stop();
    await store.pool.query('delete from graphile_worker._private_jobs where locked_by = $1', [own]);
  }
});

test('stop waits for a reap under way, so that nothing is sent to the pool once the process has ended it', async () => {
  // The pool of a process that stops: ended right after the runner's stop (CI: a reap under way sent its next
  // statement to the ended pool, and a clean shutdown logged a warning).
  const pool = createTestPool({ connectionString: testStore!.url, max: 2 });
  const locker = new pg.Client({ connectionString: testStore!.url });
  await locker.connect();
  const errors: unknown[] = [];
  try {
    // The reap's first statement reads worker_heartbeats: it waits while the table is locked.
    await locker.query('begin');
    await locker.query('lock table worker_heartbeats in access exclusive mode');
    const liveness = new WorkerLiveness({ pool, onError: (err) => errors.push(err) });
    liveness.start();
    const { rows: locking } = await locker.query<{ pid: number }>('select pg_backend_pid() as pid');
    await eventually(
      async () => {
        const { rows } = await store.pool.query<{ n: number }>(
          'select count(*)::int as n from pg_stat_activity where $1::int = any (pg_blocking_pids(pid))',
          [locking[0]!.pid],
        );
        return rows[0]!.n >= 1 ? true : undefined;
      },
      10_000,
      'the reap waiting for the lock',
    );
    let stopped = false;
    const stopping = liveness.stop().then(() => (stopped = true));
    for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
    assert.equal(stopped, false, 'stop returned while a reap was under way');
    await locker.query('commit');
    await stopping;
  } finally {
    await locker.end();
    await pool.end();
  }
  // Whatever the reap had left to send would fail now, reported as the shutdown's warning was.
  for (let i = 0; i < 5; i++) await new Promise((resolve) => setImmediate(resolve));
  assert.deepEqual(errors, []);
});

test('heartbeats and reaps failing through an outage are logged once, then their return (not a line a try)', async () => {
  const proxy = await startTcpProxy(testStore!.url);
  const pool = createTestPool({ connectionString: proxy.url, max: 2, connectionTimeoutMillis: 1_000 });
  pool.on('error', () => {});
  const lines: Array<[level: string, message: string]> = [];
  const log = (level: string) => (_fields: object, message?: string) =>
    void lines.push([level, message ?? '']);
  let failures = 0;
  const liveness = new WorkerLiveness({
    pool,
    heartbeatMs: 10,
    reapMs: 10,
    log: { info: log('info'), warn: log('warn'), error: log('error') },
    onError: () => failures++,
  });
  try {
    liveness.add('liveness-outage-test');
    liveness.start();
    await proxy.down();
    await eventually(async () => (failures >= 10 ? true : undefined), 10_000, 'ten failed tries');
    // Before: a warning with its stack at every try.
    assert.deepEqual(lines, [['warn', 'worker liveness check failed']]);
    await proxy.up();
    await eventually(async () => (lines.length === 2 ? true : undefined), 10_000, 'the return logged');
    assert.deepEqual(lines[1], ['info', 'worker liveness check works again']);
  } finally {
    await liveness.stop();
    await pool.end();
    await proxy.close();
  }
});
