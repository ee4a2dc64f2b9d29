import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import Fastify from 'fastify';
import { sql } from 'kysely';
import { installErrorHandlers } from '../../src/http/error-handler.ts';
import { inOneSnapshot, type Store } from '../../src/store/database.ts';
import { createTestStore, type TestStore } from '../helpers/database.ts';

/**
 * A read in one snapshot keeps its connection across statements: when PostgreSQL ends that backend between
 * two of them (a restart, a failover, idle_in_transaction_session_timeout), the next one fails with pg's
 * "… is not queryable", which must be the retryable 503 a lost connection is everywhere else, not a 500.
 */
let testStore: TestStore | undefined;
let store: Store;
before(async () => {
  testStore = await createTestStore({ max: 4 });
  store = testStore.store;
});
after(() => testStore?.close());

test('a snapshot whose connection is ended between its statements answers 503, retryable', async () => {
  const app = Fastify();
  installErrorHandlers(app);
  app.get('/read', async () =>
    inOneSnapshot(store.db, async (trx) => {
      const { rows } = await sql<{ pid: number }>`select pg_backend_pid() as pid`.execute(trx);
      const pid = rows[0]!.pid;
      await sql`select pg_terminate_backend(${pid})`.execute(store.db);
      // Ended while idle in the transaction: the client has heard of it before its next statement.
      for (;;) {
        const left = await sql`select 1 from pg_stat_activity where pid = ${pid}`.execute(store.db);
        if (left.rows.length === 0) break;
      }
      await new Promise((resolve) => setTimeout(resolve, 50));
      await sql`select 1`.execute(trx);
      return { ok: true };
    }),
  );
  try {
    const res = await app.inject({ method: 'GET', url: '/read' });
    assert.equal(res.statusCode, 503, res.body);
    assert.equal(res.headers['svc-allow-retry'], 'true');
  } finally {
    await app.close();
  }
});
