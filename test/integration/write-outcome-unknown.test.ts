import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import Fastify, { type FastifyInstance, type InjectOptions } from 'fastify';
import { sql } from 'kysely';
import { installErrorHandlers } from '../../src/http/error-handler.ts';
import { enqueueJob } from '../../src/jobs/enqueue.ts';
import { createStore, type Store } from '../../src/store/database.ts';
import { createTestDatabaseWithClient, type TestDatabaseWithClient } from '../helpers/database.ts';
import { eventually } from '../helpers/service-process.ts';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.ts';

/**
 * Spec 7 and 7.1.2: a 503 tells the client to resend a POST as it is; a 502 tells it to check first whether
 * the work was done. A database connection lost while a write was on its way (a COMMIT, or a statement that
 * commits on its own) leaves that unknown, so it is a 502: answered 503, a client following the spec would
 * carry the write out twice. A connection lost inside a transaction, before its COMMIT, rolls it back for
 * certain, and stays a retryable 503; so does a read.
 */
let database: TestDatabaseWithClient;
let proxy: TcpProxy;
let store: Store;
let app: FastifyInstance;

/**
 * Waits until PostgreSQL is running a statement that contains `marker`, in this file's database: another run
 * of this file on the same server has statements with the same markers.
 */
async function running(marker: string): Promise<void> {
  await eventually(
    async () => {
      const { rows } = await database.client.query(
        `select 1 from pg_stat_activity
         where state = 'active' and query like '%' || $1 || '%' and pid <> pg_backend_pid()
           and datname = current_database()`,
        [marker],
      );
      return rows.length === 1 || undefined;
    },
    10_000,
    `a running statement ${marker}`,
  );
}

/** Sends the request, cuts the database's connections while its statement marked `marker` runs, restores. */
async function cutWhileRunning(request: InjectOptions, marker: string) {
  const answer = app.inject(request);
  await running(marker);
  await proxy.down();
  try {
    return await answer;
  } finally {
    await proxy.up();
  }
}

before(async () => {
  database = await createTestDatabaseWithClient();
  await database.client.query('create table t (v int not null)');
  proxy = await startTcpProxy(database.database.url);
  store = createStore(proxy.url, { max: 2 });
  app = Fastify();
  installErrorHandlers(app);
  // The connection is cut between the transaction's last statement and its COMMIT.
  app.post('/commit-lost', async () =>
    store.db.transaction().execute(async (trx) => {
      await sql`insert into t values (1)`.execute(trx);
      await proxy.down();
      return {};
    }),
  );
  // Cut between two statements of a transaction: its COMMIT is never sent.
  app.post('/lost-before-commit', async () =>
    store.db.transaction().execute(async (trx) => {
      await sql`insert into t values (2)`.execute(trx);
      await proxy.down();
      await sql`insert into t values (2)`.execute(trx);
      return {};
    }),
  );
  // A statement outside any transaction, cut while it runs (the server goes on and commits it).
  app.post('/standalone-lost', async () => {
    await sql`insert into t select 3 from pg_sleep(1) as marker_standalone_write`.execute(store.db);
    return {};
  });
  // A read before any write, cut while it runs: nothing was written.
  app.post('/read-then-write-lost', async () => {
    await sql`select 5 from pg_sleep(1) as marker_post_read`.execute(store.db);
    await sql`insert into t values (5)`.execute(store.db);
    return {};
  });
  // A write that commits on its own, then a read cut while it runs: the write is done, the request is not.
  app.post('/write-then-read-lost', async () => {
    await sql`insert into t values (6)`.execute(store.db);
    await sql`select 6 from pg_sleep(1) as marker_read_after_write`.execute(store.db);
    return {};
  });
  // A write, then the database gone before the next statement could even get a connection.
  app.post('/write-then-no-connection', async () => {
    await sql`insert into t values (8)`.execute(store.db);
    await proxy.down();
    // The pool drops its dead idle connections: the next statement must make a new one, which is refused.
    while (store.pool.idleCount > 0) await new Promise((resolve) => setTimeout(resolve, 10));
    await sql`select 8`.execute(store.db);
    return {};
  });
  // A transaction that only read (a row lock), committed, then a read cut: nothing was written.
  app.post('/locking-read-then-read-lost', async () => {
    await store.db.transaction().execute(async (trx) => {
      await sql`select 1 from t for update`.execute(trx);
    });
    await sql`select 9 from pg_sleep(1) as marker_read_after_locking_read`.execute(store.db);
    return {};
  });
  // A transaction whose only write is a job, then the database gone before the next statement.
  app.post('/job-then-no-connection', async () => {
    await store.db.transaction().execute((trx) => enqueueJob(trx, 'outcome_probe', { n: 1 }));
    await proxy.down();
    while (store.pool.idleCount > 0) await new Promise((resolve) => setTimeout(resolve, 10));
    await sql`select 1`.execute(store.db);
    return {};
  });
  app.get('/read-lost', async () => {
    await sql`select 4 from pg_sleep(1) as marker_standalone_read`.execute(store.db);
    return {};
  });
});
after(async () => {
  await app?.close();
  await store?.close();
  await proxy?.close();
  await database?.close();
});

test('a COMMIT whose connection is lost answers 502, without svc-allow-retry', async () => {
  const res = await app.inject({ method: 'POST', url: '/commit-lost' });
  await proxy.up();
  assert.equal(res.statusCode, 502, res.body);
  assert.deepEqual(res.json(), { error: 'Bad Gateway' });
  assert.equal(res.headers['svc-allow-retry'], undefined);
});

test('a connection lost inside a transaction, before its COMMIT, answers a retryable 503', async () => {
  const res = await app.inject({ method: 'POST', url: '/lost-before-commit' });
  await proxy.up();
  assert.equal(res.statusCode, 503, res.body);
  assert.equal(res.headers['svc-allow-retry'], 'true');
  const { rows } = await database.client.query('select count(*)::int as n from t where v = 2');
  assert.equal(rows[0].n, 0);
});

test('a write outside a transaction cut while it runs answers 502, and it may well have been carried out', async () => {
  const res = await cutWhileRunning({ method: 'POST', url: '/standalone-lost' }, 'marker_standalone_write');
  assert.equal(res.statusCode, 502, res.body);
  assert.equal(res.headers['svc-allow-retry'], undefined);
  // The server finished the statement after the client was gone: a 503's blind resend would have written twice.
  await eventually(
    async () => {
      const { rows } = await database.client.query('select count(*)::int as n from t where v = 3');
      return rows[0].n === 1 || undefined;
    },
    10_000,
    'the cut write committed by the server',
  );
});

test('a read cut the same way stays a retryable 503', async () => {
  const res = await cutWhileRunning({ method: 'GET', url: '/read-lost' }, 'marker_standalone_read');
  assert.equal(res.statusCode, 503, res.body);
  assert.equal(res.headers['svc-allow-retry'], 'true');
});

test('a POST whose read, before any write, is cut stays a retryable 503', async () => {
  const res = await cutWhileRunning({ method: 'POST', url: '/read-then-write-lost' }, 'marker_post_read');
  assert.equal(res.statusCode, 503, res.body);
  assert.equal(res.headers['svc-allow-retry'], 'true');
  const { rows } = await database.client.query('select count(*)::int as n from t where v = 5');
  assert.equal(rows[0].n, 0);
});

test('a read cut after a write of the same request committed answers 502: a resend would write again', async () => {
  const res = await cutWhileRunning(
    { method: 'POST', url: '/write-then-read-lost', payload: { any: 'body' } },
    'marker_read_after_write',
  );
  assert.equal(res.statusCode, 502, res.body);
  assert.equal(res.headers['svc-allow-retry'], undefined);
  const { rows } = await database.client.query('select count(*)::int as n from t where v = 6');
  assert.equal(rows[0].n, 1);
});

test('a write, then no connection to be had for the next statement: 502 (the write is done)', async () => {
  const res = await app.inject({ method: 'POST', url: '/write-then-no-connection', payload: {} });
  await proxy.up();
  assert.equal(res.statusCode, 502, res.body);
  const { rows } = await database.client.query('select count(*)::int as n from t where v = 8');
  assert.equal(rows[0].n, 1);
});

test('a transaction that wrote nothing counts as no write: a read cut after it stays a retryable 503', async () => {
  const res = await cutWhileRunning(
    { method: 'POST', url: '/locking-read-then-read-lost', payload: {} },
    'marker_read_after_locking_read',
  );
  assert.equal(res.statusCode, 503, res.body);
  assert.equal(res.headers['svc-allow-retry'], 'true');
});

test('a job added is a write: a request that committed only a job, then failed, answers 502', async () => {
  const res = await app.inject({ method: 'POST', url: '/job-then-no-connection', payload: {} });
  await proxy.up();
  assert.equal(res.statusCode, 502, res.body);
  const { rows } = await database.client.query(
    `select count(*)::int as n from graphile_worker.jobs where task_identifier = 'outcome_probe'`,
  );
  assert.equal(rows[0].n, 1);
});
