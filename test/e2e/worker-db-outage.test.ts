import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import pg from 'pg';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { eventually, startCli, type CliProcess } from '../helpers/service-process.ts';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.ts';

/**
 * DESIGN §6: a database that goes away is a transient failure, not the end of the process. graphile-worker
 * completes and fails jobs without awaiting them, so PostgreSQL dropping while a job runs rejected a
 * promise nobody handled, and Node ended the process: with role `all`, the API with it.
 */
let database: TestDatabase | undefined;
let proxy: TcpProxy | undefined;
let proc: CliProcess | undefined;
const clients: pg.Client[] = [];
after(async () => {
  proc?.kill();
  for (const client of clients) await client.end().catch(() => {});
  await proxy?.close();
  await database?.drop();
});

test('PostgreSQL dropping while a job runs: the process carries on, and serves again once it is back', async () => {
  database = await createTestDatabase();
  proxy = await startTcpProxy(database.url);
  proc = startCli(['serve', '--role', 'all'], {
    DATABASE_URL: proxy.url,
    SVC_DATA_DIR: mkdtempSync(path.join(os.tmpdir(), 'svc-outage-')),
    SVC_PORT: '0',
    SVC_LOG_LEVEL: 'warn',
    SVC_WORKER_POLL_INTERVAL_MS: '100',
  });
  const url = (await proc.waitFor(/^ {2}public API +(http:\/\/\S+)$/m, 60_000))[1]!;
  await proc.waitFor(/^ {2}worker +running$/m);

  // A job that blocks inside the database (on a lock the test holds, on a direct connection), so that it is
  // under way when the database goes away.
  const direct = new pg.Client({ connectionString: database.url });
  const adder = new pg.Client({ connectionString: database.url });
  clients.push(direct, adder);
  await Promise.all([direct.connect(), adder.connect()]);
  await direct.query('begin');
  await direct.query('lock table customer_account_requests in access exclusive mode');
  const job = await adder.query<{ id: string }>(
    `select (graphile_worker.add_job('accounts.create_customer_account',
       '{"platform_code":"ZZZZZ9","request_id":"00000000-0000-4000-8000-000000000000"}'::json)).id`,
  );
  await eventually(
    async () => {
      // (Not on `direct`: inside its transaction pg_stat_activity is a snapshot.)
      const { rows } = await adder.query(
        `select 1 from pg_stat_activity where datname = current_database() and wait_event_type = 'Lock'
           and query ilike '%customer_account_requests%'`,
      );
      return rows.length > 0 ? true : undefined;
    },
    30_000,
    `job ${job.rows[0]!.id} blocked on the lock`,
  );

  await proxy.down();
  // The job's statement fails, and so does recording its failure: that rejection is logged, not fatal.
  await eventually(
    async () =>
      /unhandled promise rejection; the process carries on/.test(proc!.stdout() + proc!.stderr())
        ? true
        : undefined,
    30_000,
    'the rejection logged',
  );
  assert.equal(proc.child.exitCode, null, `the process ended:\n${proc.stderr()}`);
  assert.equal((await fetch(`${url}/healthz`)).status, 200, 'the API is still there');

  await direct.query('rollback');
  await proxy.up();
  await eventually(
    async () => ((await fetch(`${url}/readyz`)).status === 200 ? true : undefined),
    30_000,
    'ready again once PostgreSQL is back',
  );
});
