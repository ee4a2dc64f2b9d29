import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { enqueueJob } from '../../src/jobs/enqueue.ts';
import { WorkerLiveness } from '../../src/jobs/worker-liveness.ts';
import { startWorker } from '../../src/jobs/worker-runtime.ts';
import { createLogger } from '../../src/main/logger.ts';
import { createStore, type Store } from '../../src/store/database.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';

let database: TestDatabase;
let store: Store;
before(async () => {
  database = await createTestDatabase();
  store = createStore(database.url);
});
after(async () => {
  await store?.close();
  await database?.drop();
});

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
