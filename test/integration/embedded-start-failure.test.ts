import assert from 'node:assert/strict';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, test } from 'node:test';
import { startEmbeddedPostgres } from '../../src/store/embedded-postgres.ts';

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
