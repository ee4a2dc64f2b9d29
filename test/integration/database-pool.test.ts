import assert from 'node:assert/strict';
import { test } from 'node:test';
import { sql } from 'kysely';
import { startTestService } from '../helpers/test-service.ts';

/** README "Deployment": SVC_DB_POOL_MAX bounds the connections of a process's main pool. */
test('SVC_DB_POOL_MAX bounds the main pool: more statements at once than connections wait their turn', async () => {
  const svc = await startTestService({ env: { SVC_DB_POOL_MAX: '3' } });
  try {
    const { pool, db } = svc.runtime.store;
    assert.equal(pool.options.max, 3);
    const backends = () =>
      sql<{ pid: number }>`select pg_backend_pid() as pid, pg_sleep(0.05)`
        .execute(db)
        .then((r) => r.rows[0]!.pid);
    const pids = new Set(await Promise.all(Array.from({ length: 9 }, backends)));
    assert.ok(pids.size <= 3, `${pids.size} connections`);
    assert.ok(pool.totalCount <= 3, `${pool.totalCount} connections in the pool`);
  } finally {
    await svc.close();
  }
});
