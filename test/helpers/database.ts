import { createHash, randomBytes } from 'node:crypto';
import { createRequire } from 'node:module';
import { Kysely, PostgresDialect, type PostgresPool } from 'kysely';
import pg from 'pg';
import { loadConfig } from '../../src/config.ts';
import { createStore, type Db, type Store } from '../../src/store/database.ts';
import { listMigrations, migrate } from '../../src/store/migrate.ts';

/**
 * Each test file gets a fresh database cloned from a migrated template (STYLE: kysely, graphile-worker).
 * The template's name carries a hash of the migrations, so a new migration makes a new template; creating
 * it is serialised across parallel test processes with an advisory lock.
 */
const TEMPLATE_LOCK_ID = 7_351_846_002;

/**
 * A pg pool of a test's own. It hears its errors, as the service's pools do (src/store/database.ts): pg-pool's end()
 * resolves before its clients' connections have closed, so the forced drop of the test's database right after can
 * still reach one ("terminating connection due to administrator command"), which the pool emits: unheard, it ended
 * the test process (CI, session 30).
 */
export function createTestPool(config: pg.PoolConfig): pg.Pool {
  const pool = new pg.Pool(config);
  pool.on('error', () => {});
  return pool;
}

/**
 * The database as the code under test sees it (a Kysely over `pool`), with each query's answer shown to `onAnswer`
 * before the caller gets it: to watch what a worker reads, or to hold a read's answer back (by awaiting).
 */
export function watchedDb(
  pool: pg.Pool,
  onAnswer: (text: string, result: pg.QueryResult) => void | Promise<void>,
): Db {
  // The pool hands out the same clients again: each is wrapped once (review: wrapped at every checkout, a query's
  // answer was shown once per checkout before it, and the wrappers grew until the stack overflowed).
  const watched = new WeakSet<pg.PoolClient>();
  const watching: PostgresPool = {
    connect: async () => {
      const client = await pool.connect();
      if (watched.has(client)) return client;
      watched.add(client);
      const query = client.query.bind(client) as (text: string, values: unknown[]) => Promise<pg.QueryResult>;
      return Object.assign(client, {
        query: async (text: string, values: unknown[]) => {
          const result = await query(text, values);
          await onAnswer(text, result);
          return result;
        },
      });
    },
    end: () => pool.end(),
  };
  return new Kysely({ dialect: new PostgresDialect({ pool: watching }) }) as unknown as Db;
}

export interface TestDatabase {
  url: string;
  name: string;
  drop(): Promise<void>;
}

export function serverUrl(): string {
  const url = loadConfig().databaseUrl;
  if (!url)
    throw new Error(
      'DATABASE_URL is not set: run the suite with `npm test` (it starts an embedded PostgreSQL)',
    );
  return url;
}

export function withDatabase(url: string, name: string): string {
  const parsed = new URL(url);
  parsed.pathname = `/${name}`;
  return parsed.toString();
}

/**
 * The CREATE DATABASE of a test's database: empty, a copy of `template`, or of template0 with `icuLocale` (a word
 * of ASCII letters and dashes) as its default collation (see icuLocaleUnsupported).
 */
export function createDatabaseSql(
  name: string,
  options: { template?: string; icuLocale?: string } = {},
): string {
  if (options.icuLocale) {
    if (!/^[A-Za-z-]+$/.test(options.icuLocale)) throw new Error(`not an ICU locale: ${options.icuLocale}`);
    return `create database ${name} template template0 locale_provider icu icu_locale '${options.icuLocale}' locale 'C'`;
  }
  return `create database ${name}${options.template ? ` template ${options.template}` : ''}`;
}

/** Applies every migration to the database at `url`. */
async function migrateDatabase(url: string): Promise<void> {
  const store = createStore(url, { max: 3 });
  try {
    await migrate(store.pool);
  } finally {
    await store.close();
  }
}

/** The name of the database a connection URL names (withDatabase's inverse). */
export function databaseNameOf(url: string): string {
  return new URL(url).pathname.slice(1);
}

async function templateName(): Promise<string> {
  const hash = createHash('sha256');
  for (const file of await listMigrations()) hash.update(file.name).update(file.sql);
  const require = createRequire(import.meta.url);
  hash.update(String((require('graphile-worker/package.json') as { version: string }).version));
  return `svc_tpl_${hash.digest('hex').slice(0, 12)}`;
}

async function ensureTemplate(admin: pg.Client, base: string): Promise<string> {
  const name = await templateName();
  await admin.query('select pg_advisory_lock($1)', [TEMPLATE_LOCK_ID]);
  try {
    const exists = await admin.query('select 1 from pg_database where datname = $1', [name]);
    if (exists.rowCount) return name;
    const building = `${name}_build_${randomBytes(3).toString('hex')}`;
    await admin.query(createDatabaseSql(building));
    await migrateDatabase(withDatabase(base, building));
    // Server-side backends can outlive the pool's end() by a moment; the rename needs none left.
    await admin.query('select pg_terminate_backend(pid) from pg_stat_activity where datname = $1', [
      building,
    ]);
    await admin.query(`alter database ${building} rename to ${name}`);
    return name;
  } finally {
    await admin.query('select pg_advisory_unlock($1)', [TEMPLATE_LOCK_ID]);
  }
}

/**
 * Why the server cannot create a database of an ICU locale (PostgreSQL before 15, or built without ICU), or null
 * when it can: a test of one says so and is skipped.
 */
export async function icuLocaleUnsupported(): Promise<string | null> {
  const admin = new pg.Client({ connectionString: serverUrl() });
  await admin.connect();
  try {
    const { rows } = await admin.query<{ version: number; icu: boolean }>(
      `select current_setting('server_version_num')::int as version,
              exists (select from pg_collation where collprovider = 'i') as icu`,
    );
    if (rows[0]!.version < 150000) return 'a database of an ICU locale needs PostgreSQL 15 or later';
    if (!rows[0]!.icu) return 'this PostgreSQL was built without ICU';
    return null;
  } finally {
    await admin.end();
  }
}

/**
 * A fresh migrated database. With `icuLocale` (see icuLocaleUnsupported), one whose default collation is that ICU
 * locale's, migrated on its own: a database of another locale than the template's cannot be cloned from it.
 */
export async function createTestDatabase(options: { icuLocale?: string } = {}): Promise<TestDatabase> {
  const base = serverUrl();
  const admin = new pg.Client({ connectionString: base });
  await admin.connect();
  try {
    const name = `svc_test_${randomBytes(6).toString('hex')}`;
    if (options.icuLocale) {
      await admin.query(createDatabaseSql(name, { icuLocale: options.icuLocale }));
      await migrateDatabase(withDatabase(base, name));
    } else {
      await admin.query(createDatabaseSql(name, { template: await ensureTemplate(admin, base) }));
    }
    return {
      url: withDatabase(base, name),
      name,
      drop: async () => {
        const client = new pg.Client({ connectionString: base });
        await client.connect();
        try {
          await client.query(`drop database if exists ${name} with (force)`);
        } finally {
          await client.end();
        }
      },
    };
  } finally {
    await admin.end();
  }
}

export interface TestDatabaseWithClient {
  database: TestDatabase;
  /** Connected to `database`, for tests that talk SQL to it directly. */
  client: pg.Client;
  /** Ends the client and drops the database. */
  close(): Promise<void>;
}

/** A fresh database with a client connected to it (a test file's `before`; `close` in its `after`). */
export async function createTestDatabaseWithClient(): Promise<TestDatabaseWithClient> {
  const database = await createTestDatabase();
  const client = new pg.Client({ connectionString: database.url });
  await client.connect();
  return {
    database,
    client,
    close: async () => {
      await client.end();
      await database.drop();
    },
  };
}

export interface TestStore {
  /** A store of the service's own kind on a fresh database. */
  store: Store;
  /** The database's URL, for connections of a test's own. */
  url: string;
  /** Closes the store and drops the database. */
  close(): Promise<void>;
}

/** A fresh database with a store on it (a test file's `before`; `close` in its `after`). */
export async function createTestStore(options: { max?: number } = {}): Promise<TestStore> {
  const database = await createTestDatabase();
  const store = createStore(database.url, options);
  return {
    store,
    url: database.url,
    close: async () => {
      await store.close();
      await database.drop();
    },
  };
}
