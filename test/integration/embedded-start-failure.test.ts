import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import { chmodSync, existsSync, mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import pg from 'pg';
import { startEmbeddedPostgres } from '../../src/store/embedded-postgres.ts';
import { PROJECT_ROOT } from '../helpers/service-process.ts';

/**
 * When the embedded cluster cannot start, the error carries PostgreSQL's own reason. The library rejects
 * with nothing, and every such failure read "is another svc using that data dir?" (review: a data dir made
 * by another major version, a read-only one, a taken port).
 */
const dataDir = mkdtempSync(path.join(os.tmpdir(), 'svc-embedded-fail-'));
after(() => rmSync(dataDir, { recursive: true, force: true }));

test('a data dir made by another major version: the error says so, in PostgreSQL’s words', async () => {
  const first = await startEmbeddedPostgres(dataDir);
  await first.stop();
  // What the next major version of the embedded server would find in a data dir made by this one.
  writeFileSync(path.join(dataDir, 'pg', 'PG_VERSION'), '17\n');
  await assert.rejects(startEmbeddedPostgres(dataDir), (error: Error) => {
    assert.match(
      error.message,
      /^the embedded PostgreSQL in \S+ did not start: FATAL: database files are incompatible with server DETAIL: /,
    );
    assert.match(error.message, /DETAIL: The data directory was initialized by PostgreSQL version 17/);
    return true;
  });
});

test('a first start killed during initdb leaves nothing that stops the next start', async () => {
  // initdb writes PG_VERSION first: a start SIGKILLed during it left a cluster without its databases, which
  // every later start took for a complete one ("database postgres does not exist", for good).
  const fresh = mkdtempSync(path.join(os.tmpdir(), 'svc-embedded-killed-'));
  chmodSync(fresh, 0o755);
  try {
    const script = `
      import { startEmbeddedPostgres } from ${JSON.stringify(path.join(PROJECT_ROOT, 'src/store/embedded-postgres.ts'))};
      await startEmbeddedPostgres(${JSON.stringify(fresh)});`;
    // Its own process group, so that initdb is killed with it, as a terminal's kill of the whole job would.
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      cwd: PROJECT_ROOT,
      // The library writes initdb's password file to the temporary dir, and a killed initdb leaves it.
      env: { ...process.env, TMPDIR: fresh },
      detached: true,
      stdio: 'ignore',
    });
    const exited = once(child, 'exit');
    // Killed once initdb has begun writing the cluster (its PG_VERSION is there).
    const begun = () =>
      readdirSync(fresh).some(
        (name) => name.startsWith('pg') && existsSync(path.join(fresh, name, 'PG_VERSION')),
      );
    const deadline = Date.now() + 60_000;
    while (!begun()) {
      assert.ok(Date.now() < deadline, 'initdb never began');
      assert.equal(child.exitCode, null, 'the first start ended on its own');
      await new Promise((resolve) => setTimeout(resolve, 5));
    }
    process.kill(-child.pid!, 'SIGKILL');
    await exited;
    const again = await startEmbeddedPostgres(fresh);
    try {
      const client = new pg.Client({ connectionString: again.url });
      await client.connect();
      const { rows } = await client.query('select current_database() as db');
      await client.end();
      assert.equal(rows[0].db, 'postgres');
    } finally {
      await again.stop();
    }
    assert.deepEqual(
      readdirSync(fresh).filter((name) => name.startsWith('pg.')),
      [],
      'the killed start’s staging dir is removed',
    );
  } finally {
    rmSync(fresh, { recursive: true, force: true });
  }
});
