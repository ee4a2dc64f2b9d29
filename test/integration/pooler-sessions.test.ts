import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { refuseSharedSessions } from '../../src/store/session-check.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { pgbouncerUnavailable, startOwnPgBouncer, type OwnPgBouncer } from '../helpers/own-pgbouncer.ts';
import { runCli } from '../helpers/service-process.ts';

/**
 * Behind a pooler in transaction mode the service's connections are not sessions: LISTEN heard nothing (a revoked
 * key kept working on the other instance, nothing logged), the migration lock outlived `svc migrate`, session
 * settings and the job queue's prepared statements landed on whichever server connection (probe). A start and
 * `svc migrate` refuse it, naming it; session mode, and PostgreSQL itself, are taken.
 */
const unavailable = pgbouncerUnavailable();

describe('a pooler between the service and PostgreSQL', { skip: unavailable ?? false }, () => {
  let database: TestDatabase;
  const bouncers: OwnPgBouncer[] = [];
  before(async () => {
    database = await createTestDatabase();
  });
  after(async () => {
    for (const bouncer of bouncers) await bouncer.stop();
    await database?.drop();
  });

  const checked = async (url: string) => {
    const pool = new pg.Pool({ connectionString: url, max: 2 });
    try {
      return await refuseSharedSessions(pool).then(
        () => null,
        (err: Error) => err.message,
      );
    } finally {
      await pool.end();
    }
  };

  test('in transaction mode: refused at the start and by svc migrate, naming it and what to do', async () => {
    const bouncer = await startOwnPgBouncer(database.url, 'transaction');
    bouncers.push(bouncer);
    assert.match(
      (await checked(bouncer.url)) ?? 'taken',
      /^DATABASE_URL: (two connections held at once ran on one PostgreSQL backend|one connection's statements ran on two PostgreSQL backends) .*: a pooler in transaction or statement mode is in between\. .*pool_mode=session/,
    );
    const migrated = await runCli(['migrate'], { DATABASE_URL: bouncer.url });
    assert.equal(migrated.code, 1, migrated.stderr);
    assert.match(
      migrated.stderr,
      /^error: svc migrate failed: DATABASE_URL: .*a pooler in transaction or statement mode is in between/,
    );
    // A start stops before it migrates or listens.
    const served = await runCli(['serve'], { DATABASE_URL: bouncer.url, SVC_PORT: '0' });
    assert.equal(served.code, 1, served.stderr);
    assert.match(
      served.stderr,
      /^error: svc serve failed: DATABASE_URL: .*a pooler in transaction or statement mode is in between/m,
    );
  });

  test('in session mode, and directly, the connections are sessions: taken', async () => {
    const bouncer = await startOwnPgBouncer(database.url, 'session');
    bouncers.push(bouncer);
    assert.equal(await checked(bouncer.url), null);
    assert.equal(await checked(database.url), null);
    const migrated = await runCli(['migrate'], { DATABASE_URL: bouncer.url });
    assert.equal(migrated.code, 0, migrated.stderr);
  });
});

test('whether PgBouncer could be tried here', { skip: unavailable === null }, () => {
  // Said, so that a run without it does not pass for one that tried it.
  assert.ok(unavailable, 'skipped with a reason');
  console.log(`# pooler tests skipped: ${unavailable}`);
});
