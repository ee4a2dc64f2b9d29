import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import pg from 'pg';
import { loadConfig } from '../../src/config.ts';
import { createLogger } from '../../src/main/logger.ts';
import { startRuntime } from '../../src/main/runtime.ts';
import { createStore } from '../../src/store/database.ts';
import { listMigrations, migrate } from '../../src/store/migrate.ts';
import { createTestDatabase, serverUrl, withDatabase } from '../helpers/database.ts';
import { runCli } from '../helpers/service-process.ts';

/**
 * Issue 2 "Store": numbered forward-only migrations applied at start and by `svc migrate`, safe when two
 * instances start at the same time on a fresh database; money columns are numeric.
 */
const created: string[] = [];

async function freshDatabase(): Promise<string> {
  const name = `svc_mig_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: serverUrl() });
  await admin.connect();
  try {
    await admin.query(`create database ${name}`);
  } finally {
    await admin.end();
  }
  created.push(name);
  return withDatabase(serverUrl(), name);
}

after(async () => {
  const admin = new pg.Client({ connectionString: serverUrl() });
  await admin.connect();
  try {
    for (const name of created) await admin.query(`drop database if exists ${name} with (force)`);
  } finally {
    await admin.end();
  }
});

async function appliedVersions(url: string): Promise<string[]> {
  const client = new pg.Client({ connectionString: url });
  await client.connect();
  try {
    const { rows } = await client.query<{ version: string }>(
      'select version from schema_migrations order by version',
    );
    return rows.map((r) => r.version);
  } finally {
    await client.end();
  }
}

describe('migrations', () => {
  test('two instances migrating the same fresh database at once both succeed; each migration applies once', async () => {
    const url = await freshDatabase();
    const files = (await listMigrations()).map((m) => m.name);
    const first = createStore(url, { max: 3 });
    const second = createStore(url, { max: 3 });
    try {
      const [x, y] = await Promise.all([migrate(first.pool), migrate(second.pool)]);
      // Together they applied every file exactly once (the lock lets one do the work; the other finds it done).
      assert.deepEqual([...x, ...y].sort(), files);
      assert.deepEqual(
        await appliedVersions(url),
        files.map((f) => f.slice(0, 4)),
      );
      // The job queue's schema was migrated too.
      const queue = await first.pool.query(
        `select 1 from information_schema.schemata where schema_name = 'graphile_worker'`,
      );
      assert.equal(queue.rowCount, 1);
      // Running again changes nothing.
      assert.deepEqual(await migrate(second.pool), []);
    } finally {
      await first.close();
      await second.close();
    }
  });

  test('two `svc migrate` processes on one fresh database: both exit 0, the migrations applied once', async () => {
    const url = await freshDatabase();
    const files = (await listMigrations()).map((m) => m.name);
    const env = {
      DATABASE_URL: url,
      SVC_DATA_DIR: mkdtempSync(path.join(os.tmpdir(), 'svc-mig-')),
      SVC_LOG_LEVEL: 'warn',
    };
    const results = await Promise.all([runCli(['migrate'], env), runCli(['migrate'], env)]);
    for (const r of results) assert.equal(r.code, 0, r.stderr);
    const applied = results.flatMap((r) => {
      const match = /^applied: (.*)$/m.exec(r.stdout);
      return match ? match[1]!.split(', ') : [];
    });
    assert.deepEqual(applied.sort(), files);
    assert.deepEqual(
      await appliedVersions(url),
      files.map((f) => f.slice(0, 4)),
    );
    const again = await runCli(['migrate'], env);
    assert.equal(again.code, 0, again.stderr);
    assert.match(again.stdout, /database is up to date/);
  });

  test('the service applies migrations at start', async () => {
    const url = await freshDatabase();
    const runtime = await startRuntime(
      loadConfig({
        DATABASE_URL: url,
        SVC_ROLE: 'api',
        SVC_PORT: '0',
        SVC_DATA_DIR: mkdtempSync(path.join(os.tmpdir(), 'svc-mig-')),
      }),
      { logger: createLogger('silent') },
    );
    try {
      const files = (await listMigrations()).map((m) => m.name.slice(0, 4));
      assert.deepEqual(await appliedVersions(url), files);
      const res = await fetch(`${runtime.url}/readyz`);
      assert.equal(res.status, 200);
    } finally {
      await runtime.close();
    }
  });

  test('migration files are numbered NNNN_name.sql, in order, with no number used twice', async () => {
    const files = await listMigrations();
    assert.ok(files.length >= 1);
    assert.equal(files[0]!.name, '0001_foundation.sql');
    const versions = files.map((f) => f.version);
    assert.equal(
      new Set(versions).size,
      versions.length,
      `duplicate migration numbers: ${versions.join(',')}`,
    );
    assert.deepEqual([...versions].sort(), versions);
  });
});

describe('money columns', () => {
  test('are numeric; no column anywhere is a binary float', async () => {
    const database = await createTestDatabase();
    const client = new pg.Client({ connectionString: database.url });
    await client.connect();
    try {
      const { rows } = await client.query<{ table_name: string; column_name: string; data_type: string }>(
        `select table_name, column_name, data_type from information_schema.columns where table_schema = 'public'`,
      );
      const type = (table: string, column: string) =>
        rows.find((r) => r.table_name === table && r.column_name === column)?.data_type;
      for (const [table, column] of [
        ['balance_accounts', 'balance'],
        ['balance_movements', 'change'],
        ['prices', 'price'],
        ['platforms', 'deposit_fee_bps'],
      ] as const) {
        assert.equal(type(table, column), 'numeric', `${table}.${column}`);
      }
      const floats = rows.filter((r) => r.data_type === 'double precision' || r.data_type === 'real');
      assert.deepEqual(floats, [], 'binary floating-point columns');
      // Columns named as amounts, by the conventions of the wire contract, are numeric whoever added them.
      const money = rows.filter((r) =>
        /(^|_)(amount|balance|price|quantity|notional|bps)$/.test(r.column_name),
      );
      assert.ok(money.length >= 4);
      for (const r of money) assert.equal(r.data_type, 'numeric', `${r.table_name}.${r.column_name}`);
    } finally {
      await client.end();
      await database.drop();
    }
  });
});
