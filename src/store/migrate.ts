import { readdir, readFile } from 'node:fs/promises';
import type pg from 'pg';
import { Logger as QueueLogger, runMigrations as runQueueMigrations } from 'graphile-worker';

/**
 * Numbered, forward-only SQL migrations (src/store/migrations/NNNN_name.sql), then the job queue's own.
 * A session-level advisory lock serialises concurrent starts: the second instance waits, then finds
 * everything applied. A shipped migration is never edited; add the next number instead.
 */
const MIGRATION_LOCK_ID = 7_351_846_001;
const MIGRATIONS_DIR = new URL('./migrations/', import.meta.url);
/** graphile-worker logs through our logger elsewhere; its migrations have nothing worth saying. */
const silentQueueLogger = new QueueLogger(() => () => {});

export interface MigrationFile {
  version: string;
  name: string;
  sql: string;
}

export async function listMigrations(): Promise<MigrationFile[]> {
  const names = (await readdir(MIGRATIONS_DIR)).filter((n) => /^\d{4}_[a-z0-9_]+\.sql$/.test(n)).sort();
  return Promise.all(
    names.map(async (name) => ({
      version: name.slice(0, 4),
      name,
      sql: await readFile(new URL(name, MIGRATIONS_DIR), 'utf8'),
    })),
  );
}

export async function migrate(pool: pg.Pool, log: (msg: string) => void = () => {}): Promise<string[]> {
  const client = await pool.connect();
  const applied: string[] = [];
  try {
    await client.query('select pg_advisory_lock($1)', [MIGRATION_LOCK_ID]);
    await client.query(
      `create table if not exists schema_migrations (
         version text primary key, name text not null, applied_at timestamptz not null default now())`,
    );
    const done = new Set(
      (await client.query<{ version: string }>('select version from schema_migrations')).rows.map(
        (r) => r.version,
      ),
    );
    for (const file of await listMigrations()) {
      if (done.has(file.version)) continue;
      try {
        await client.query('begin');
        await client.query(file.sql);
        await client.query('insert into schema_migrations (version, name) values ($1, $2)', [
          file.version,
          file.name,
        ]);
        await client.query('commit');
      } catch (error) {
        await client.query('rollback');
        throw new Error(`migration ${file.name} failed: ${(error as Error).message}`, { cause: error });
      }
      applied.push(file.name);
      log(`applied migration ${file.name}`);
    }
    await runQueueMigrations({ pgPool: pool, logger: silentQueueLogger });
  } finally {
    await client.query('select pg_advisory_unlock($1)', [MIGRATION_LOCK_ID]).catch(() => {});
    client.release();
  }
  return applied;
}
