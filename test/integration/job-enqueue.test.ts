import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { enqueueJob } from '../../src/jobs/enqueue.ts';
import type { Store } from '../../src/store/database.ts';
import { createTestStore, type TestStore } from '../helpers/database.ts';

/**
 * A keyed job replaces the pending one of its key, also when a worker locks that one in the middle of
 * graphile-worker's add_jobs, between its "take the key off a locked job" and its insert-or-update (which
 * updates only an unlocked job). That interleaving is made certain here by a trigger that locks the job of
 * the key right after the first of the two, as a worker's fetch committing at that moment would.
 */
let testStore: TestStore | undefined;
let store: Store;
before(async () => {
  testStore = await createTestStore();
  store = testStore.store;
});
after(() => testStore?.close());

const KEY = 'trade-settle:race';

async function jobsOfTask(task: string) {
  const { rows } = await store.pool.query<{ key: string | null; payload: unknown; locked: boolean }>(
    `select j.key, j.payload, j.locked_at is not null as locked
       from graphile_worker._private_jobs j join graphile_worker._private_tasks t on t.id = j.task_id
      where t.identifier = $1 order by j.id`,
    [task],
  );
  return rows;
}

test('a keyed job whose pending job is locked by a worker in the middle of add_job is still added', async () => {
  await enqueueJob(
    store.db,
    'race_probe',
    { from: 'accepted' },
    { jobKey: KEY, runAt: new Date(Date.now() + 60_000) },
  );
  // After add_jobs' first statement (an UPDATE, so a statement trigger fires even when it changes no row),
  // the pending job of the key is locked, as by a worker whose fetch commits right then. (The trigger's own
  // update fires it again: the setting, local to the transaction, makes it act once.)
  await store.pool.query(`
    create function test_lock_key() returns trigger language plpgsql as $$
    begin
      -- Once per transaction: the insert-or-update fires UPDATE statement triggers too.
      if current_setting('test.locked_key', true) is distinct from 'yes' then
        perform set_config('test.locked_key', 'yes', true);
        update graphile_worker._private_jobs set locked_at = now(), locked_by = 'worker-a'
        where key = '${KEY}' and locked_at is null;
      end if;
      return null;
    end $$;
    create trigger test_lock_key after update on graphile_worker._private_jobs
      for each statement execute function test_lock_key();`);
  try {
    await store.db
      .transaction()
      .execute((trx) =>
        enqueueJob(
          trx,
          'race_probe',
          { from: 'active' },
          { jobKey: KEY, runAt: new Date(Date.now() + 60_000) },
        ),
      );
  } finally {
    await store.pool.query(`drop trigger test_lock_key on graphile_worker._private_jobs;
      drop function test_lock_key();`);
  }
  assert.deepEqual(await jobsOfTask('race_probe'), [
    // The running one, started from the old state, without its key.
    { key: null, payload: { from: 'accepted' }, locked: true },
    // The next step, pending under the key.
    { key: KEY, payload: { from: 'active' }, locked: false },
  ]);
});

test('without a race, a keyed job replaces its pending job (one job of the key)', async () => {
  await enqueueJob(store.db, 'replace_probe', { n: 1 }, { jobKey: 'k' });
  await enqueueJob(store.db, 'replace_probe', { n: 2 }, { jobKey: 'k' });
  assert.deepEqual(await jobsOfTask('replace_probe'), [{ key: 'k', payload: { n: 2 }, locked: false }]);
});
