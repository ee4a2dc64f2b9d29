import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { mkdtempSync } from 'node:fs';
import { readFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, describe, test } from 'node:test';
import pg from 'pg';
import { loadConfig } from '../../src/config.ts';
import { createLogger } from '../../src/main/logger.ts';
import { startRuntime } from '../../src/main/runtime.ts';
import { createStore } from '../../src/store/database.ts';
import {
  checksumOf,
  listMigrations,
  migrate,
  plainStatements,
  type MigrationFile,
  type MigrationLog,
} from '../../src/store/migrate.ts';
import {
  createDatabaseSql,
  createTestDatabase,
  databaseNameOf,
  icuLocaleUnsupported,
  serverUrl,
  withDatabase,
} from '../helpers/database.ts';
import { eventually, PROJECT_ROOT, runCli } from '../helpers/service-process.ts';

/**
 * Issue 2 "Store": numbered forward-only migrations applied at start and by `svc migrate`, safe when two
 * instances start at the same time on a fresh database; money columns are numeric.
 */
const created: string[] = [];
const icuUnsupported = await icuLocaleUnsupported();

/** An empty database; with `turkish`, one whose default collation is ICU tr-TR (icuLocaleUnsupported). */
async function freshDatabase(options: { turkish?: boolean } = {}): Promise<string> {
  const name = `svc_mig_${randomBytes(6).toString('hex')}`;
  const admin = new pg.Client({ connectionString: serverUrl() });
  await admin.connect();
  try {
    await admin.query(createDatabaseSql(name, { icuLocale: options.turkish ? 'tr-TR' : undefined }));
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

/**
 * Until one session of the database of `pool` waits for a lock and matches `where` (SQL on pg_stat_activity;
 * its query text is the first 1 kB), or `done()`. Not on a connection in a transaction: there pg_stat_activity is
 * read once and kept.
 */
function lockWaiting(pool: pg.Pool, where: string, label: string, done = () => false) {
  return eventually(
    async () => {
      if (done()) return true;
      const { rows } = await pool.query<{ n: number }>(
        `select count(*)::int as n from pg_stat_activity
          where datname = current_database() and wait_event_type = 'Lock' and ${where}`,
      );
      return rows[0]!.n === 1 || undefined;
    },
    10_000,
    label,
  );
}

/** README "Least privilege": what the database's owner runs for the role the service runs as, taken from there. */
async function leastPrivilegeGrants(role: string): Promise<string> {
  const readme = await readFile(path.join(PROJECT_ROOT, 'README.md'), 'utf8');
  const block = /\*\*Least privilege\*\*[\s\S]*?```sql\n([\s\S]*?)```/.exec(readme)?.[1];
  assert.ok(block, 'the README shows the grants');
  return block.replaceAll('svc_app', role);
}

/** The oid of the index `name`, or null: a rebuilt index has another. */
async function indexOid(client: pg.Client, name: string): Promise<string | null> {
  const { rows } = await client.query<{ oid: string | null }>(`select to_regclass($1)::oid::text as oid`, [
    name,
  ]);
  return rows[0]!.oid;
}

/** A log for migrate() that keeps its warnings for the test to read. */
function warningsKept(): { warnings: string[]; log: MigrationLog } {
  const warnings: string[] = [];
  return { warnings, log: { info: () => {}, warn: (m) => warnings.push(m) } };
}

/** A migration file of a test's own, applied after the project's. */
function probe(sql: string, name = '9998_lock_probe.sql'): MigrationFile {
  return { version: name.slice(0, 4), name, sql, checksum: checksumOf(sql) };
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

  test('an applied migration whose file changed since is refused; one applied before checksums is adopted', async () => {
    const url = await freshDatabase();
    const store = createStore(url, { max: 2 });
    try {
      await migrate(store.pool);
      // Applied by a version that kept no checksums: what is there now is taken as what was applied.
      await store.pool.query(`update schema_migrations set checksum = null where version = '0005'`);
      assert.deepEqual(await migrate(store.pool), []);
      const files = await listMigrations();
      const { rows } = await store.pool.query<{ version: string; checksum: string }>(
        'select version, checksum from schema_migrations order by version',
      );
      assert.deepEqual(
        rows,
        files.map((f) => ({ version: f.version, checksum: f.checksum })),
      );
      // Edited after it was applied (as 0008 was, five times): the database never got the new contents.
      await store.pool.query(`update schema_migrations set checksum = 'other' where version = '0008'`);
      await assert.rejects(migrate(store.pool), {
        message:
          'migration 0008_webhook_lanes.sql was changed after it was applied to this database; a shipped migration is never edited (add the next number instead): restore it as it was applied',
      });
      // A line-ending conversion is not a change.
      assert.equal(checksumOf('a\r\nb\r\n'), checksumOf('a\nb\n'));
    } finally {
      await store.close();
    }
  });

  test('a database migrated by a newer version is said so at start (warn), and this one still starts', async () => {
    const url = await freshDatabase();
    const store = createStore(url, { max: 2 });
    try {
      await migrate(store.pool);
      await store.pool.query(
        `insert into schema_migrations (version, name) values ('9999', '9999_from_the_future.sql')`,
      );
      const { warnings, log } = warningsKept();
      assert.deepEqual(await migrate(store.pool, log), []);
      assert.deepEqual(warnings, [
        'the database has migrations this version does not have (9999_from_the_future.sql): a newer version migrated it, and this one may not work with it',
      ]);
    } finally {
      await store.close();
    }
  });

  test("a no-transaction file's DO block is one statement, whatever lines of its body end with `;`", () => {
    const sql = [
      '-- svc:no-transaction',
      '-- a comment;',
      'do $$',
      'begin',
      '  -- said inside;',
      '  perform 1;',
      'end',
      '$$;',
      'create index concurrently a on b (c);',
      "do $body$ begin raise notice '$$;'; end $body$;",
      'analyze b;',
    ].join('\n');
    assert.deepEqual(plainStatements(sql), [
      'do $$\nbegin\n  -- said inside;\n  perform 1;\nend\n$$',
      'create index concurrently a on b (c)',
      "do $body$ begin raise notice '$$;'; end $body$",
      'analyze b',
    ]);
    // Inside a body a `--` line is text: its `$$` ends the body, as PostgreSQL reads it.
    assert.deepEqual(plainStatements('do $$ begin perform 1; end\n-- ends here: $$;\nanalyze b;'), [
      'do $$ begin perform 1; end\n-- ends here: $$',
      'analyze b',
    ]);
  });

  test('while 0042 runs, a duplicate email is refused by an index of the name every version maps to 409', async () => {
    // Review: 0042 dropped the old unique index before its successor took the name, and an instance of the version
    // before, which knows the name alone, answered that window's duplicates 500.
    const url = await freshDatabase();
    const store = createStore(url, { max: 2 });
    try {
      const all = await listMigrations();
      await migrate(store.pool, undefined, { files: all.filter((f) => f.version < '0042') });
      await store.pool.query(`insert into platforms (platform_code, name) values ('MIGR42', 'M')`);
      await store.pool.query(
        `insert into participants (participant_code, platform_code, email) values ('KIM001', 'MIGR42', 'Kim@example.com')`,
      );
      const refusedBy = async () => {
        return store.pool
          .query(
            `insert into participants (participant_code, platform_code, email) values ('KIM002', 'MIGR42', 'KIM@example.com')`,
          )
          .then(
            () => null,
            (e: { code?: string; constraint?: string }) => `${e.code} ${e.constraint}`,
          );
      };
      const statements = plainStatements(all.find((f) => f.version === '0042')!.sql);
      assert.equal(await refusedBy(), '23505 participants_platform_email', 'before');
      for (const statement of statements) {
        await store.pool.query(statement);
        assert.equal(await refusedBy(), '23505 participants_platform_email', `after: ${statement}`);
      }
    } finally {
      await store.close();
    }
  });

  test('a -- svc:no-transaction migration builds its indexes CONCURRENTLY, valid, and can be run again whole', async () => {
    const file = (await listMigrations()).find((f) => f.version === '0020')!;
    const statements = plainStatements(file.sql);
    assert.equal(statements.length, 8);
    for (const statement of statements) assert.match(statement, /^(drop|create) index concurrently /);
    const url = await freshDatabase();
    const store = createStore(url, { max: 2 });
    try {
      await migrate(store.pool);
      const valid = async () =>
        (
          await store.pool.query<{ name: string; valid: boolean }>(
            `select c.relname as name, i.indisvalid as valid from pg_index i join pg_class c on c.oid = i.indexrelid
             where c.relname in ('balance_accounts_platform_created', 'participants_customers_created',
               'trades_owner_time', 'trades_counterparty_time') order by 1`,
          )
        ).rows;
      const expected = [
        { name: 'balance_accounts_platform_created', valid: true },
        { name: 'participants_customers_created', valid: true },
        { name: 'trades_counterparty_time', valid: true },
        { name: 'trades_owner_time', valid: true },
      ];
      assert.deepEqual(await valid(), expected);
      // Stopped before its record (a crash mid-way): the next start runs the whole file again.
      await store.pool.query(`delete from schema_migrations where version = '0020'`);
      assert.deepEqual(await migrate(store.pool), ['0020_list_indexes.sql']);
      assert.deepEqual(await valid(), expected);
    } finally {
      await store.close();
    }
  });

  test('while a CONCURRENTLY build runs, another start waits for the lock without blocking it', async () => {
    // A start waiting in pg_advisory_lock holds a snapshot, which the build waits for: they waited for each
    // other. Both stores start on a database one migration short.
    const url = await freshDatabase();
    const first = createStore(url, { max: 2 });
    const second = createStore(url, { max: 2 });
    try {
      await migrate(first.pool);
      await first.pool.query(`delete from schema_migrations where version = '0020'`);
      // A writer's open transaction holds the build at its start (it waits for those that may write the table).
      const writer = await first.pool.connect();
      await writer.query('begin');
      await writer.query('lock table trades in row exclusive mode');
      const both = Promise.all([migrate(first.pool), migrate(second.pool)]);
      // The build waits for the writer; meanwhile the other start is waiting for the lock.
      await lockWaiting(
        second.pool,
        `query like '% index concurrently %'`,
        'the build waiting for the writer',
      );
      await writer.query('commit');
      writer.release();
      const [x, y] = await both;
      assert.deepEqual([...x, ...y], ['0020_list_indexes.sql']);
    } finally {
      await first.close();
      await second.close();
    }
  });

  describe('a migration waiting for a table lock', () => {
    const alterTrades = 'alter table trades add column lock_probe text;';
    const hasProbeColumn = async (pool: pg.Pool) =>
      (
        await pool.query(
          `select 1 from information_schema.columns where table_name = 'trades' and column_name = 'lock_probe'`,
        )
      ).rowCount === 1;

    test('lets the queries queued behind it through, then applies once the long transaction ends', async () => {
      const url = await freshDatabase();
      const store = createStore(url, { max: 4 });
      try {
        await migrate(store.pool);
        const files = [...(await listMigrations()), probe(alterTrades)];
        // A long-open transaction that read trades holds a lock the ALTER must wait for.
        const reader = await store.pool.connect();
        await reader.query('begin');
        await reader.query('select count(*) from trades');
        const { warnings, log } = warningsKept();
        const migrating = migrate(store.pool, log, { files, lockTimeoutMs: 150, lockAttempts: 1_000 });
        await lockWaiting(
          store.pool,
          `query like 'alter table trades add column lock_probe%'`,
          'the ALTER waiting for the reader',
        );
        // A query queued behind the waiting ALTER: without the bound on the wait, it would wait as long as the
        // reader's transaction (here: for ever, since the reader ends only after it).
        const { rows } = await store.pool.query<{ n: number }>('select count(*)::int as n from trades');
        assert.equal(rows[0]!.n, 0);
        assert.equal(await hasProbeColumn(store.pool), false);
        await reader.query('commit');
        reader.release();
        assert.deepEqual(await migrating, ['9998_lock_probe.sql']);
        assert.equal(await hasProbeColumn(store.pool), true);
        assert.ok(warnings.length >= 1);
        assert.match(
          warnings[0]!,
          /^migration 9998_lock_probe\.sql waited 150 ms for a table lock \(try 1 of 1000\): undone, trying again$/,
        );
      } finally {
        await store.close();
      }
    });

    test('fails after its tries naming the transaction it waited for, with nothing applied', async () => {
      const url = await freshDatabase();
      const store = createStore(url, { max: 4 });
      const holder = new pg.Client({ connectionString: url, application_name: 'long-report' });
      await holder.connect();
      try {
        await migrate(store.pool);
        await holder.query('begin');
        await holder.query('select count(*) from trades');
        const files = [...(await listMigrations()), probe(alterTrades)];
        await assert.rejects(
          migrate(store.pool, undefined, { files, lockTimeoutMs: 100, lockAttempts: 3 }),
          (error: Error) => {
            assert.match(
              error.message,
              /^migration 9998_lock_probe\.sql failed: it waited 100 ms for a table lock 3 times; transactions open longer than that: pid \d+ \(long-report\), idle in transaction for \d+ s, last query: select count\(\*\) from trades$/,
            );
            return true;
          },
        );
        await holder.query('commit');
        assert.equal(await hasProbeColumn(store.pool), false);
        assert.deepEqual((await appliedVersions(url)).slice(-1), [files.at(-2)!.version]);
        // The bound is the transaction's own: the pool's next user does not inherit it.
        const { rows } = await store.pool.query<{ lock_timeout: string }>('show lock_timeout');
        assert.equal(rows[0]!.lock_timeout, '0');
      } finally {
        await holder.end();
        await store.close();
      }
    });
  });

  test('a migration PostgreSQL ends a deadlock with is undone and tried again, and the other transaction goes on', async () => {
    // Review: 0041 as first written locked funding_sessions, then client_auth_tokens, while token issuance writes
    // them the other way round; the deadlock failed the upgrade at once, where a lock wait is tried again.
    const url = await freshDatabase();
    const setup = createStore(url, { max: 2 });
    await migrate(setup.pool);
    // The migration's session finds the deadlock (after 5 s of waiting), the holder's would only after a minute:
    // the migration is the one PostgreSQL ends, whatever the machine's pace within those 5 s.
    await setup.pool.query(`alter database ${databaseNameOf(url)} set deadlock_timeout = '5s'`);
    await setup.close();
    const store = createStore(url, { max: 4 });
    const holder = new pg.Client({ connectionString: url });
    await holder.connect();
    try {
      await holder.query(`set deadlock_timeout = '60s'`);
      await holder.query('begin');
      await holder.query('select count(*) from quotes');
      const sql =
        'alter table trades add column lock_probe text; alter table quotes add column lock_probe text;';
      const files = [...(await listMigrations()), probe(sql, '9998_deadlock_probe.sql')];
      const { warnings, log } = warningsKept();
      const migrating = migrate(store.pool, log, { files, lockTimeoutMs: 30_000, lockAttempts: 3 });
      await lockWaiting(
        store.pool,
        `query like 'alter table trades add column lock_probe%'`,
        'the migration holding trades and waiting for quotes',
      );
      // The holder now waits for trades, which the migration holds: a deadlock.
      const { rows } = await holder.query<{ n: number }>('select count(*)::int as n from trades');
      assert.equal(rows[0]!.n, 0);
      await holder.query('commit');
      assert.deepEqual(await migrating, ['9998_deadlock_probe.sql']);
      assert.equal(warnings.length, 1, warnings.join('\n'));
      assert.match(
        warnings[0]!,
        /^migration 9998_deadlock_probe\.sql ended in a deadlock with another transaction \(try 1 of 3\): undone, trying again$/,
      );
      const { rowCount } = await store.pool.query(
        `select 1 from information_schema.columns where column_name = 'lock_probe' and table_name in ('trades', 'quotes')`,
      );
      assert.equal(rowCount, 2);
    } finally {
      await holder.end();
      await store.close();
    }
  });

  test('0041 locks the session table alone: token and fund-quote writes, which lock both in either order, go on', async () => {
    // Review: dropping the sessions' foreign key to the tokens locked both tables, and deadlocked with fwc token
    // issuance (the token, then its session) or with a fund quote (its session, then the key's check of the token
    // table), whichever order it took them in; bounded to give way, it starved under load.
    const url = await freshDatabase();
    const store = createStore(url, { max: 4 });
    const all = await listMigrations();
    await migrate(store.pool, undefined, { files: all.filter((f) => f.version < '0041') });
    const issuing = new pg.Client({ connectionString: url });
    const quoting = new pg.Client({ connectionString: url });
    await issuing.connect();
    await quoting.connect();
    let migrating: Promise<string[]> | undefined;
    try {
      // A token with fwc has written its token; a fund quote has written its session.
      await issuing.query('begin');
      await issuing.query('lock table client_auth_tokens in row exclusive mode');
      await quoting.query('begin');
      await quoting.query('lock table funding_sessions in row exclusive mode');
      const { warnings, log } = warningsKept();
      migrating = migrate(store.pool, log, { files: all, lockTimeoutMs: 30_000, lockAttempts: 2 });
      await lockWaiting(
        store.pool,
        `query like 'alter table funding_sessions%'`,
        '0041 waiting for the fund quote',
      );
      // The fund quote's key check takes the token table, which the migration does not wait for.
      await quoting.query('lock table client_auth_tokens in row share mode');
      await quoting.query('commit');
      await issuing.query('lock table funding_sessions in row exclusive mode');
      await issuing.query('commit');
      assert.ok((await migrating).includes('0041_client_tokens_purge.sql'));
      assert.deepEqual(warnings, []);
    } finally {
      await issuing.end();
      await quoting.end();
      // A failure above leaves the migration going: it ends before its pool does (or it would hide the failure).
      await migrating?.catch(() => {});
      await store.close();
    }
  });

  test(
    '0042 on a Turkish database where a platform onboarded one email twice: it names them and changes nothing, until one is changed',
    { skip: icuUnsupported ? `no Turkish-locale database: ${icuUnsupported}` : false },
    async () => {
      // Its lower('I') is 'ı': before 0042 the unique index took Ivan@… and ivan@… for two emails (probe).
      const url = await freshDatabase({ turkish: true });
      const store = createStore(url, { max: 3 });
      const indexes = async () =>
        (
          await store.pool.query<{ def: string }>(
            `select indexdef as def from pg_indexes where tablename = 'participants' and indexdef like '%email%' order by 1`,
          )
        ).rows.map((r) => r.def);
      try {
        const all = await listMigrations();
        await migrate(store.pool, undefined, { files: all.filter((f) => f.version < '0042') });
        await store.pool.query(
          `insert into platforms (platform_code, name) values ('TRKSH1', 'T'), ('TRKSH2', 'U')`,
        );
        await store.pool.query(
          `insert into participants (participant_code, platform_code, email) values
             ('IVAN01', 'TRKSH1', 'Ivan@example.com'), ('IVAN02', 'TRKSH1', 'ivan@example.com'),
             ('IVAN03', 'TRKSH2', 'ivan@example.com'), ('KIM001', 'TRKSH1', 'Kim@example.com')`,
        );
        const before = await indexes();
        await assert.rejects(
          migrate(store.pool),
          (error: Error) =>
            error.message ===
            'migration 0042_participants_email_ascii_case.sql failed: participants of one platform share an email in other letter case (platform TRKSH1: IVAN01 <Ivan@example.com>, IVAN02 <ivan@example.com>): give one of each another email, then start again',
        );
        assert.deepEqual(await indexes(), before);
        assert.ok(!(await appliedVersions(url)).includes('0042'));

        await store.pool.query(
          `update participants set email = 'ivan.2@example.com' where participant_code = 'IVAN02'`,
        );
        assert.deepEqual(await migrate(store.pool), ['0042_participants_email_ascii_case.sql']);
        assert.deepEqual(await indexes(), [
          'CREATE INDEX participants_email ON public.participants USING btree (lower((email COLLATE "C"))) WHERE (email IS NOT NULL)',
          'CREATE UNIQUE INDEX participants_platform_email ON public.participants USING btree (platform_code, lower((email COLLATE "C"))) WHERE (email IS NOT NULL)',
        ]);
        await assert.rejects(
          store.pool.query(
            `insert into participants (participant_code, platform_code, email) values ('KIM002', 'TRKSH1', 'kIm@example.com')`,
          ),
          { constraint: 'participants_platform_email' },
        );
      } finally {
        await store.close();
      }
    },
  );

  test("a migration runs past the database's statement_timeout and lock_timeout, and gives its connection back with them", async () => {
    // An operator's safety net for the service's queries: under it, a build that waited for a transaction, or a
    // rewrite that took longer, failed every time it was run again (probe).
    const url = await freshDatabase();
    const name = databaseNameOf(url);
    const admin = new pg.Client({ connectionString: serverUrl() });
    await admin.connect();
    await admin.query(`alter database ${name} set statement_timeout = '200ms'`);
    await admin.query(`alter database ${name} set lock_timeout = '200ms'`);
    await admin.end();
    // Two connections (the job queue's migrations take one while the migration lock is held), both asked after.
    const store = createStore(url, { max: 2 });
    const watching = new pg.Pool({ connectionString: url, max: 1 });
    const holder = new pg.Client({ connectionString: url });
    await holder.connect();
    const slow = probe('create table probe (i int); select pg_sleep(0.4);', '0001_slow.sql');
    const build = probe(
      '-- svc:no-transaction\ncreate index concurrently probe_i on probe (i);\n',
      '0002_build.sql',
    );
    let migrating: Promise<string[]> | undefined;
    try {
      assert.deepEqual(await migrate(store.pool, undefined, { files: [slow] }), ['0001_slow.sql']);
      await holder.query('begin');
      await holder.query('insert into probe values (1)');
      migrating = migrate(store.pool, undefined, { files: [slow, build], lockAttempts: 1 });
      await lockWaiting(watching, `query like 'create index concurrently probe_i%'`, 'the build');
      // Past the database's lock_timeout, then the transaction the build waits for ends.
      await new Promise((resolve) => setTimeout(resolve, 400));
      await holder.query('commit');
      assert.deepEqual(await migrating, ['0002_build.sql']);
      const settings = () =>
        store.pool.query<{ pid: number; statement: string; lock: string }>(
          `select pg_backend_pid() as pid, current_setting('statement_timeout') as statement,
                  current_setting('lock_timeout') as lock, pg_sleep(0.05)`,
        );
      const answers = (await Promise.all([settings(), settings()])).map((r) => r.rows[0]!);
      assert.notEqual(answers[0]!.pid, answers[1]!.pid);
      for (const { statement, lock } of answers)
        assert.deepEqual({ statement, lock }, { statement: '200ms', lock: '200ms' });
    } finally {
      await holder.end();
      await migrating?.catch(() => {});
      await watching.end();
      await store.close();
    }
  });

  test('a no-transaction file tried again after a lock wait goes on from the statement undone, its builds kept', async () => {
    // Review: from the top, each try rebuilt the file's indexes, and its first statement, a CONCURRENTLY drop,
    // waited with no bound for the very transaction the try had given way to: the start hung without a word.
    const url = await freshDatabase();
    const store = createStore(url, { max: 2 });
    const reader = new pg.Client({ connectionString: url });
    await reader.connect();
    const file = probe(
      [
        '-- svc:no-transaction',
        'drop index concurrently if exists probe_i;',
        'create index concurrently probe_i on probe (i);',
        'alter table probe add column if not exists j int;',
      ].join('\n'),
      '0002_alter.sql',
    );
    const table = probe('create table probe (i int);', '0001_table.sql');

    let migrating: Promise<string[]> | undefined;
    try {
      await migrate(store.pool, undefined, { files: [table] });
      // A reader left in its transaction: the ALTER waits for it; the builds do not.
      await reader.query('begin');
      await reader.query('select count(*) from probe');
      const { warnings, log } = warningsKept();
      migrating = migrate(store.pool, log, { files: [table, file], lockTimeoutMs: 100, lockAttempts: 50 });
      await eventually(async () => (warnings.length >= 3 ? true : undefined), 20_000, 'three tries undone');
      const built = await indexOid(reader, 'probe_i');
      assert.ok(built);
      await reader.query('commit');
      assert.deepEqual(await migrating, ['0002_alter.sql']);
      assert.equal(await indexOid(reader, 'probe_i'), built, 'built once');
      assert.match(warnings[0]!, /^migration 0002_alter\.sql waited 100 ms for a table lock \(try 1 of 50\)/);
    } finally {
      await reader.end();
      await migrating?.catch(() => {});
      await store.close();
    }
  });

  test('a build PostgreSQL ends a deadlock with is built again from its own drop, the builds before it kept', async () => {
    const url = await freshDatabase();
    // PostgreSQL looks for a deadlock once per wait, deadlock_timeout after it began. The build's look comes 5 s
    // into its wait, when the writer's lock request has long been made (at 1 s, a stalled machine could still be
    // before it: the look found nothing, and the writer's ended it instead: review); the writer's, at 60 s, never.
    const migrating5s = new URL(url);
    migrating5s.searchParams.set('options', '-c deadlock_timeout=5s');
    const store = createStore(migrating5s.toString(), { max: 2 });
    const writer = new pg.Client({ connectionString: url });
    const gate = new pg.Client({ connectionString: url });
    await writer.connect();
    await gate.connect();
    const table = probe('create table probe (i int);', '0001_table.sql');
    const file = probe(
      [
        '-- svc:no-transaction',
        'drop index concurrently if exists probe_a;',
        'create index concurrently probe_a on probe (i);',
        // Where the test holds the file until the writer has begun (after the first build, which would wait for it).
        'select pg_advisory_xact_lock(7351846042);',
        'drop index concurrently if exists probe_u;',
        'create unique index concurrently probe_u on probe (i);',
      ].join('\n'),
      '0002_builds.sql',
    );

    let migrating: Promise<string[]> | undefined;
    try {
      await migrate(store.pool, undefined, { files: [table] });
      await writer.query(`set deadlock_timeout = '60s'`);
      await gate.query('select pg_advisory_lock(7351846042)');
      const { warnings, log } = warningsKept();
      migrating = migrate(store.pool, log, { files: [table, file], lockAttempts: 3, lockTimeoutMs: 60_000 });
      await lockWaiting(store.pool, `query like 'select pg_advisory_xact_lock%'`, 'the file at its gate');
      const first = await indexOid(writer, 'probe_a');
      assert.ok(first);
      await writer.query('begin');
      await writer.query('insert into probe values (1)');
      await gate.query('select pg_advisory_unlock(7351846042)');
      await lockWaiting(store.pool, `query like 'create unique index concurrently probe_u%'`, 'the build');
      // The build waits for the writer, which now waits for the build.
      await writer.query('lock table probe in share update exclusive mode');
      await writer.query('commit');
      assert.deepEqual(await migrating, ['0002_builds.sql']);
      assert.match(
        warnings.join('\n'),
        /^migration 0002_builds\.sql ended in a deadlock with another transaction \(try 1 of 3\)/,
      );
      assert.equal(await indexOid(writer, 'probe_a'), first, 'the first build kept');
      const { rows } = await writer.query<{ valid: boolean }>(
        `select indisvalid as valid from pg_index where indexrelid = 'probe_u'::regclass`,
      );
      assert.deepEqual(rows, [{ valid: true }]);
    } finally {
      await writer.end();
      await gate.end();
      await migrating?.catch(() => {});
      await store.close();
    }
  });

  test('a role that may use the tables but not change them serves a database its owner migrated; one to apply names what to do', async () => {
    // Probe: every start ran `create table if not exists schema_migrations`, which such a role may not.
    const url = await freshDatabase();
    const suffix = randomBytes(4).toString('hex');
    const [ownerRole, appRole] = [`svc_owner_${suffix}`, `svc_app_${suffix}`];
    const as = (role: string) => {
      const roleUrl = new URL(url);
      roleUrl.username = role;
      roleUrl.password = 'least-privilege';
      return roleUrl.toString();
    };
    const name = databaseNameOf(url);
    const admin = new pg.Client({ connectionString: url });
    await admin.connect();
    const owner = createStore(as(ownerRole), { max: 2 });
    const app = createStore(as(appRole), { max: 2 });
    const reader = new pg.Client({ connectionString: as(appRole) });
    const refusal = (role: string, what: string) =>
      `${what}: permission denied for schema public: this role (${role}) may not change the schema: run \`svc migrate\` as the database's owner, then start again`;
    try {
      await admin.query(`create role ${ownerRole} login password 'least-privilege'`);
      await admin.query(`create role ${appRole} login password 'least-privilege'`);
      await admin.query(`alter database ${name} owner to ${ownerRole}`);
      await reader.connect();
      // Nobody has migrated it yet.
      await admin.query('revoke create on schema public from public');
      await assert.rejects(migrate(app.pool), {
        message: refusal(appRole, 'the table of applied migrations cannot be made'),
      });
      // As before PostgreSQL 15: every role may create in public (the README's first line takes it away).
      await admin.query('grant create on schema public to public');

      await migrate(owner.pool);
      const grants = await leastPrivilegeGrants(appRole);
      await owner.pool.query(grants);
      await owner.pool.query(grants); // safe to run again, as the README says
      assert.deepEqual(await migrate(app.pool), []);
      // What serving takes: the tables, and the job queue, whose tables have row-level security.
      await app.pool.query(`insert into platforms (platform_code, name) values ('LEAST1', 'Least')`);
      await app.pool.query(`select graphile_worker.add_job('least_privilege_probe')`);

      const more = [...(await listMigrations()), probe('create table probe (i int);', '9999_probe.sql')];
      await assert.rejects(migrate(app.pool, undefined, { files: more }), {
        message: refusal(appRole, 'migration 9999_probe.sql failed'),
      });

      // An instance's transaction holds the lock a migration of the owner's waits for: PostgreSQL hides it from the
      // owner, which says so (review: "no transaction is open that long now").
      const { rows: held } = await reader.query<{ pid: number }>('select pg_backend_pid() as pid');
      await reader.query('begin');
      await reader.query('select count(*) from platforms');
      const alter = probe('alter table platforms add column probe text;', '9998_alter.sql');
      await assert.rejects(
        migrate(owner.pool, undefined, {
          files: [...(await listMigrations()), alter],
          lockTimeoutMs: 100,
          lockAttempts: 1,
        }),
        (error: Error) => {
          assert.match(
            error.message,
            /^migration 9998_alter\.sql failed: it waited 100 ms for a table lock 1 times; transactions open longer than that: /,
          );
          // The reader alone: not the app's idle connections, nor the test's own; and the hint once.
          assert.ok(
            error.message.endsWith(
              `: pid ${held[0]!.pid} of role ${appRole}, in a transaction this role may not see; (PostgreSQL hides other roles' transactions from this one: grant it pg_read_all_stats)`,
            ),
            error.message,
          );
          return true;
        },
      );
    } finally {
      // Each step whatever the others did: the roles are the server's, not the database's (review).
      await reader.end().catch(() => {});
      await app.close().catch(() => {});
      await owner.close().catch(() => {});
      for (const cleanup of [
        `alter database ${name} owner to current_user`,
        `drop owned by ${ownerRole}, ${appRole}`,
        `drop role if exists ${ownerRole}`,
        `drop role if exists ${appRole}`,
      ])
        await admin.query(cleanup).catch(() => {});
      await admin.end();
    }
  });

  test('a no-transaction file bounds the wait of its statements that are not CONCURRENTLY builds', async () => {
    const url = await freshDatabase();
    const store = createStore(url, { max: 4 });
    const holder = new pg.Client({ connectionString: url });
    await holder.connect();
    try {
      await migrate(store.pool);
      await holder.query('begin');
      await holder.query('select count(*) from balance_accounts');
      // 0029 as a new file: its ALTERs wait for the holder's lock, each for at most the bound.
      const file = (await listMigrations()).find((f) => f.version === '0029')!;
      await store.pool.query(`delete from schema_migrations where version = '0029'`);
      await assert.rejects(
        migrate(store.pool, undefined, { lockTimeoutMs: 100, lockAttempts: 2 }),
        /^Error: migration 0029_balance_not_negative\.sql failed: it waited 100 ms for a table lock 2 times; transactions open longer than that: pid \d+, idle in transaction/,
      );
      await holder.query('commit');
      assert.deepEqual(await migrate(store.pool, undefined, { lockTimeoutMs: 100 }), [file.name]);
    } finally {
      await holder.end();
      await store.close();
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
