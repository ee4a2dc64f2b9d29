import assert from 'node:assert/strict';
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { DataDirError, makeDataDir, readOrCreate } from '../../src/lib/data-dir-file.ts';

const dir = mkdtempSync(path.join(os.tmpdir(), 'svc-data-dir-file-'));
after(() => rmSync(dir, { recursive: true, force: true }));

test('two makers at once agree on one value, the one the file holds (the loser reads the winner’s)', async () => {
  // Both found no file and made a value; the last rename won, and the other went on with a value the file did
  // not hold (the embedded cluster's password: every later start failed to log in, review).
  const file = path.join(dir, 'secret');
  const values = await Promise.all([readOrCreate(file, () => 'first'), readOrCreate(file, () => 'second')]);
  const kept = readFileSync(file, 'utf8').trim();
  assert.deepEqual(values, [kept, kept]);
  assert.deepEqual(
    readdirSync(dir).filter((name) => name.endsWith('.tmp')),
    [],
    'no temporary file left behind',
  );
  // Read, not made, once it is there.
  assert.equal(await readOrCreate(file, () => 'third'), kept);
});

test('a data dir that cannot be made says where and why, as a DataDirError', async () => {
  const file = path.join(dir, 'a-file');
  writeFileSync(file, '');
  await assert.rejects(makeDataDir(path.join(file, 'data')), (error: Error) => {
    assert.ok(error instanceof DataDirError);
    assert.equal(error.message, `cannot create ${path.join(file, 'data')}: ${file} is not a directory`);
    return true;
  });
});

test('a kept value that cannot be read says which file and why, as a DataDirError', async () => {
  // Was node's "EISDIR: illegal operation on a directory, read", naming no file (probe).
  const file = path.join(dir, 'jwt-private-key.pem');
  mkdirSync(file);
  await assert.rejects(
    readOrCreate(file, () => 'made'),
    (error: Error) => {
      assert.ok(error instanceof DataDirError);
      assert.equal(error.message, `cannot read ${file}: it is a directory, not a file`);
      return true;
    },
  );
});
