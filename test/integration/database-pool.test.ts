import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import path from 'node:path';
import { promisify } from 'node:util';
import { test } from 'node:test';
import { sql } from 'kysely';
import { createStore, type Store, type Trx } from '../../src/store/database.ts';
import { eventually, PROJECT_ROOT } from '../helpers/service-process.ts';
import { startTestService, type TestService } from '../helpers/test-service.ts';

const execFileAsync = promisify(execFile);

/**
 * Runs `check` with a test service and a store of its database, whose URL is given `parameters` (a session's
 * settings, an application name) and the database `databaseDefaults` (ALTER DATABASE … SET); both are closed
 * after it, whatever it did.
 */
async function withStoreOf(
  parameters: Record<string, string>,
  options: Parameters<typeof createStore>[1],
  check: (store: Store, svc: TestService, url: string) => Promise<void>,
  databaseDefaults: Record<string, string> = {},
): Promise<void> {
  const svc = await startTestService();
  const url = new URL(svc.database.url);
  for (const [name, value] of Object.entries(parameters)) url.searchParams.set(name, value);
  let store: Store | undefined;
  try {
    // Set before the store is made: its connections start with them, as on an operator's database.
    for (const [setting, value] of Object.entries(databaseDefaults))
      await svc.runtime.store.pool.query(`alter database ${svc.database.name} set ${setting} = '${value}'`);
    store = createStore(url.toString(), options);
    await check(store, svc, url.toString());
  } finally {
    await store?.close();
    await svc.close();
  }
}

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

test("every connection ends a transaction left idle for a minute, and keeps the URL's own server settings", async () => {
  // A backend whose client vanished mid-transaction held its row locks for the server's TCP keepalive (2 h).
  await withStoreOf({ options: '-c application_name=from-the-url' }, { max: 1 }, async (store, svc, url) => {
    const settings = await sql<{ idle: string; app: string }>`
      select current_setting('idle_in_transaction_session_timeout') as idle,
             current_setting('application_name') as app`.execute(store.db);
    assert.deepEqual(settings.rows[0], { idle: '1min', app: 'from-the-url' });
    // Nothing added to the startup packet: a pooler (PgBouncer) refuses an `options` it does not know.
    assert.equal(store.pool.options.connectionString, url);
    const bookkeeping = createStore(svc.database.url, {
      max: 1,
      sessionSettings: { synchronous_commit: 'off' },
    });
    try {
      const commit = await sql<{ sync: string; idle: string }>`
        select current_setting('synchronous_commit') as sync,
               current_setting('idle_in_transaction_session_timeout') as idle`.execute(bookkeeping.db);
      assert.deepEqual(
        commit.rows[0],
        { sync: 'off', idle: '1min' },
        "a store's own settings, and the shared one",
      );
    } finally {
      await bookkeeping.close();
    }
    const own = await sql<{ idle: string }>`
      select current_setting('idle_in_transaction_session_timeout') as idle`.execute(svc.runtime.store.db);
    assert.equal(own.rows[0]!.idle, '1min', "the service's own pool");
  });
});

test("times and intervals read right on a database set to other styles (an operator's DateStyle 'SQL, DMY')", async () => {
  await withStoreOf(
    {},
    { max: 1 },
    async (store) => {
      const { rows } = await sql<{ t: Date; i: { hours?: number; minutes?: number }; style: string }>`
        select '2026-01-02 03:04:05.678+00'::timestamptz as t, interval '90 minutes' as i,
               current_setting('DateStyle') as style`.execute(store.db);
      assert.equal(rows[0]!.style, 'ISO, MDY');
      assert.ok(rows[0]!.t instanceof Date, String(rows[0]!.t));
      assert.equal(rows[0]!.t.getTime(), Date.UTC(2026, 0, 2, 3, 4, 5, 678));
      assert.deepEqual({ ...rows[0]!.i }, { hours: 1, minutes: 30 });
    },
    { datestyle: 'SQL, DMY', intervalstyle: 'postgres_verbose' },
  );
});

test("a transaction that waited for another's row lock sees what it committed, on a database whose default isolation is 'serializable'", async () => {
  await withStoreOf(
    {},
    { max: 2 },
    async (store, svc) => {
      await sql
        .raw(
          `create table isolation_probe (id int primary key, n int); insert into isolation_probe values (1, 0)`,
        )
        .execute(svc.runtime.store.db);
      const bump = (trx: Trx) =>
        sql<{ n: number }>`update isolation_probe set n = n + 1 where id = 1 returning n`.execute(trx);
      let commitFirst!: () => void;
      const held = new Promise<void>((resolve) => (commitFirst = resolve));
      let bumped!: () => void;
      const firstBumped = new Promise<void>((resolve) => (bumped = resolve));
      const first = store.db.transaction().execute(async (trx) => {
        await bump(trx);
        bumped();
        await held;
      });
      await firstBumped;
      // The second's first statement waits for the first's lock: its snapshot is older than the first's commit.
      const second = store.db.transaction().execute(async (trx) => {
        const { rows } = await sql<{
          level: string;
        }>`select current_setting('transaction_isolation') as level`.execute(trx);
        return { level: rows[0]!.level, n: (await bump(trx)).rows[0]!.n };
      });
      await eventually(
        async () => {
          const { rows } = await sql<{ n: number }>`select count(*)::int as n from pg_stat_activity
          where datname = current_database() and wait_event_type = 'Lock'
            and query like 'update isolation_probe%'`.execute(svc.runtime.store.db);
          return rows[0]!.n === 1 ? true : undefined;
        },
        10_000,
        'the second transaction waiting for the row',
      );
      commitFirst();
      await first;
      // Under the database's 'serializable', the update was refused: could not serialize access (40001).
      assert.deepEqual(await second, { level: 'read committed', n: 2 });
    },
    { default_transaction_isolation: 'serializable' },
  );
});

test('a new connection is handed out only after its settings are applied: pg sees one statement at a time', async () => {
  // Queued from the pool's 'connect' event, the settings statement ran while the caller's first statement
  // was sent, which pg deprecates: every `npm start` printed a DeprecationWarning (an error in pg 9).
  // A process of its own, since Node prints a deprecation once per process.
  const svc = await startTestService();
  try {
    const script = `
      import { createStore } from ${JSON.stringify(path.join(PROJECT_ROOT, 'src/store/database.ts'))};
      const store = createStore(process.env.DATABASE_URL, { max: 2 });
      const rows = await Promise.all([1, 2, 3].map((n) => store.pool.query('select $1::int as n', [n])));
      console.log(JSON.stringify(rows.map((r) => r.rows[0].n)));
      await store.close();`;
    const { stdout, stderr } = await execFileAsync(
      process.execPath,
      ['--import', 'tsx', '--input-type=module', '-e', script],
      { cwd: PROJECT_ROOT, env: { ...process.env, DATABASE_URL: svc.database.url } },
    );
    assert.equal(stdout.trim(), '[1,2,3]');
    assert.doesNotMatch(stderr, /DeprecationWarning/);
  } finally {
    await svc.close();
  }
});

test('the readiness probe answers on a connection of its own, which the close ends; a probe after it is refused', async () => {
  await withStoreOf({ application_name: 'readiness-probe-test' }, { max: 2 }, async (store, svc) => {
    const connections = () =>
      sql<{ n: number }>`select count(*)::int as n from pg_stat_activity
        where application_name = 'readiness-probe-test'`
        .execute(svc.runtime.store.db)
        .then((r) => r.rows[0]!.n);
    await store.probe();
    assert.equal(store.pool.totalCount, 0, 'not a connection of the pool');
    assert.equal(await connections(), 1);
    await store.close();
    await eventually(async () => ((await connections()) === 0 ? true : undefined), 5_000, 'its end');
    // Review: one made after the close was never ended, and held the process open.
    await assert.rejects(store.probe(), /the store is closed/);
    assert.equal(await connections(), 0);
  });
});

test('the readiness probe fails on a database that takes no writes, as every write there does', async () => {
  // Every session of this store read only, as on a standby or with default_transaction_read_only (probe: /readyz
  // said ready while every write failed).
  await withStoreOf({ options: '-c default_transaction_read_only=on' }, { max: 1 }, async (store, svc) => {
    await assert.rejects(store.probe(), /the database takes no writes \(read only\)/);
    await assert.rejects(
      sql`create temporary table readonly_probe (n int)`.execute(store.db),
      (error: unknown) => {
        assert.equal((error as { code?: string }).code, '25006');
        return true;
      },
    );
    const writable = createStore(svc.database.url, { max: 1 });
    await writable.probe();
    await writable.close();
  });
});

test('a database made read only for the sessions to come fails the probe once its connection is made afresh', async () => {
  await withStoreOf({}, { max: 1, probeConnectionLifetimeS: 1 }, async (store, svc) => {
    const database = new URL(svc.database.url).pathname.slice(1);
    try {
      await store.probe();
      // As for maintenance: new sessions only. The probe's kept session said ready for good (review).
      await sql`alter database ${sql.id(database)} set default_transaction_read_only = on`.execute(
        svc.runtime.store.db,
      );
      // Until it fails for being read only (a probe that fails otherwise on a loaded machine is asked again).
      await eventually(
        () =>
          store.probe().then(
            () => undefined,
            (error: Error) => (/read only/.test(error.message) ? true : undefined),
          ),
        10_000,
        'the probe failing as read only',
      );
    } finally {
      await sql`alter database ${sql.id(database)} reset default_transaction_read_only`.execute(
        svc.runtime.store.db,
      );
    }
  });
});
