import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { once } from 'node:events';
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs';
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

test('a cluster whose password file is gone: the error names the file, and the cluster starts once it is back', async () => {
  // Probe: a data dir copied without pg-password read "password authentication failed for user postgres".
  const copied = mkdtempSync(path.join(os.tmpdir(), 'svc-embedded-password-'));
  try {
    await (await startEmbeddedPostgres(copied)).stop();
    const passwordFile = path.join(copied, 'pg-password');
    const password = readFileSync(passwordFile, 'utf8');
    rmSync(passwordFile);
    await assert.rejects(startEmbeddedPostgres(copied), {
      name: 'DataDirError',
      message: `${passwordFile} is missing, and the cluster in ${path.join(copied, 'pg')} was made with the password it held: restore it from where the data dir was copied or backed up, or move ${path.join(copied, 'pg')} away to start with an empty database`,
    });
    assert.ok(!existsSync(passwordFile), 'no new password was made in its place');
    // Emptied (review: "empty password returned by client", naming no file).
    writeFileSync(passwordFile, '\n');
    await assert.rejects(startEmbeddedPostgres(copied), {
      name: 'DataDirError',
      message: new RegExp(
        `^${passwordFile.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')} is empty, and the cluster`,
      ),
    });
    // Another password (a copy from another data dir, a file written over): said so, naming the file, and the
    // cluster is stopped (probe: the service's first connection failed with "password authentication failed").
    writeFileSync(passwordFile, 'not-the-password-of-this-cluster');
    await assert.rejects(startEmbeddedPostgres(copied), {
      name: 'DataDirError',
      message: `${passwordFile} does not hold the password the cluster in ${path.join(copied, 'pg')} was made with (PostgreSQL refused it): restore the pg-password that came with that cluster, from where the data dir was copied or backed up, or move ${path.join(copied, 'pg')} away to start with an empty database`,
    });
    assert.ok(!existsSync(path.join(copied, 'pg', 'postmaster.pid')), 'the cluster was stopped');
    writeFileSync(passwordFile, password);
    await (await startEmbeddedPostgres(copied)).stop();
  } finally {
    rmSync(copied, { recursive: true, force: true });
  }
});

test('a password of the user’s own with characters a URL gives a meaning to: the cluster starts and is connected to', async () => {
  // Review: put in the URL as it was, `#`, `/` or `?` made one pg could not read, and the start failed after the
  // cluster had started, leaving it running with nothing to stop it.
  const own = mkdtempSync(path.join(os.tmpdir(), 'svc-embedded-own-password-'));
  try {
    writeFileSync(path.join(own, 'pg-password'), 'p#ss/w?rd%20@:x\n');
    const database = await startEmbeddedPostgres(own);
    try {
      const client = new pg.Client({ connectionString: database.url });
      await client.connect();
      const { rows } = await client.query<{ one: number }>('select 1 as one');
      await client.end();
      assert.deepEqual(rows, [{ one: 1 }]);
    } finally {
      await database.stop();
    }
    assert.ok(!existsSync(path.join(own, 'pg', 'postmaster.pid')), 'stopped');
  } finally {
    rmSync(own, { recursive: true, force: true });
  }
});

test('a cluster whose files its user cannot read: the error says so, in the server’s words before its log', async () => {
  // Probe: a data dir copied without its owner (`cp -r` as root) read "is another svc using that data dir?".
  const copied = mkdtempSync(path.join(os.tmpdir(), 'svc-embedded-unreadable-'));
  try {
    await (await startEmbeddedPostgres(copied)).stop();
    // What the cluster's user meets in a copy owned by another (mode 700): nothing it may enter.
    chmodSync(path.join(copied, 'pg'), 0o000);
    await assert.rejects(startEmbeddedPostgres(copied), (error: Error) => {
      assert.match(
        error.message,
        /^the embedded PostgreSQL in \S+ did not start: postgres: could not access the server configuration file ".*postgresql\.conf": Permission denied/,
      );
      return true;
    });
    // Said over several lines, all of them (review: only the first, which named no file).
    chmodSync(path.join(copied, 'pg'), 0o700);
    rmSync(path.join(copied, 'pg', 'global', 'pg_control'));
    await assert.rejects(startEmbeddedPostgres(copied), (error: Error) => {
      assert.match(error.message, /did not start: postgres: could not find the database system .*pg_control/);
      return true;
    });
  } finally {
    chmodSync(path.join(copied, 'pg'), 0o700);
    rmSync(copied, { recursive: true, force: true });
  }
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
    // The password initdb was given stays out of the temporary dir, which every local user can read (review: the
    // library wrote it there 0644, and a killed initdb left it), in a dir of the data dir's that no one else lists.
    assert.deepEqual(
      readdirSync(fresh).filter((name) => name.startsWith('pg-password-')),
      [],
      'no password file in the temporary dir',
    );
    const pwfileDir = path.join(fresh, `pg.pwfile-${child.pid}`);
    assert.equal(
      statSync(pwfileDir).mode & 0o066,
      0,
      'only its owner reads or writes the password file’s dir',
    );
    assert.equal(readdirSync(pwfileDir).filter((name) => name.startsWith('pg-password-')).length, 1);
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
      'the killed start’s staging dir and password file are removed',
    );
  } finally {
    rmSync(fresh, { recursive: true, force: true });
  }
});

test('a pg dir that holds files but no cluster is refused at once, naming it, before any initdb', async () => {
  const foreign = mkdtempSync(path.join(os.tmpdir(), 'svc-embedded-foreign-'));
  try {
    mkdirSync(path.join(foreign, 'pg'));
    writeFileSync(path.join(foreign, 'pg', 'notes.txt'), 'not a cluster');
    await assert.rejects(startEmbeddedPostgres(foreign), {
      name: 'DataDirError',
      message: `${path.join(foreign, 'pg')} holds files but no PostgreSQL cluster (no PG_VERSION): move it away, or choose another data dir`,
    });
    assert.deepEqual(readdirSync(foreign).sort(), ['pg', 'pg-password'], 'no staging dir made');
  } finally {
    rmSync(foreign, { recursive: true, force: true });
  }
});

test('two first starts on one data dir at once: one runs the cluster, the other says it is taken, nothing is left behind', async () => {
  // Each stages its own cluster; the second to finish found the first one's in place and failed on node's
  // "ENOTEMPTY: directory not empty, rename", leaving its 40 MB staging dir.
  const shared = mkdtempSync(path.join(os.tmpdir(), 'svc-embedded-twice-'));
  chmodSync(shared, 0o755);
  const script = `
    import { startEmbeddedPostgres } from ${JSON.stringify(path.join(PROJECT_ROOT, 'src/store/embedded-postgres.ts'))};
    try {
      const db = await startEmbeddedPostgres(${JSON.stringify(shared)});
      console.log('started ' + db.url);
      process.stdin.resume();
      await new Promise((resolve) => process.stdin.once('end', resolve));
      await db.stop();
    } catch (error) {
      console.error(String(error?.message ?? error));
      process.exit(1);
    }`;
  const starts = [0, 1].map(() => {
    const child = spawn(process.execPath, ['--import', 'tsx', '--input-type=module', '-e', script], {
      cwd: PROJECT_ROOT,
      stdio: ['pipe', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout!.on('data', (chunk) => (stdout += chunk));
    child.stderr!.on('data', (chunk) => (stderr += chunk));
    const ready = new Promise<'started' | 'failed'>((resolve) => {
      child.stdout!.on('data', () => stdout.includes('started') && resolve('started'));
      child.once('exit', () => resolve(stdout.includes('started') ? 'started' : 'failed'));
    });
    return { child, ready, stdout: () => stdout, stderr: () => stderr, exited: once(child, 'exit') };
  });
  try {
    const outcomes = await Promise.all(starts.map((start) => start.ready));
    assert.deepEqual([...outcomes].sort(), ['failed', 'started'], starts.map((s) => s.stderr()).join('\n'));
    const failed = starts[outcomes.indexOf('failed')]!;
    assert.match(failed.stderr(), /did not start: FATAL: lock file "postmaster\.pid" already exists/);
    // The password file holds the password of the cluster in place: both starts made one, and the last rename
    // won, whichever cluster was moved in (every later start then failed to log in, review). Logged in with it:
    const url = /started (\S+)/.exec(starts[outcomes.indexOf('started')]!.stdout())![1]!;
    const running = new URL(url);
    running.password = readFileSync(path.join(shared, 'pg-password'), 'utf8').trim();
    const client = new pg.Client({ connectionString: running.href });
    await client.connect();
    await client.end();
    assert.deepEqual(
      readdirSync(shared).filter((name) => name.startsWith('pg.')),
      [],
      'no staging dir is left behind',
    );
  } finally {
    for (const start of starts) start.child.stdin!.end();
    await Promise.all(starts.map((start) => start.exited));
    rmSync(shared, { recursive: true, force: true });
  }
});
