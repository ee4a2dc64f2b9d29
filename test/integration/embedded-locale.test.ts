import assert from 'node:assert/strict';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { test } from 'node:test';
import pg from 'pg';
import { startEmbeddedPostgres } from '../../src/store/embedded-postgres.ts';

/**
 * The embedded cluster is made in the C locale with UTF-8 text, whatever the environment says: initdb refused a LANG
 * naming a locale the machine has not installed ("invalid locale settings"), and `npm start` failed in a slim
 * container whose LANG was en_US.UTF-8 (probe); and one made in a Turkish locale lowered I to ı.
 */
test('a first start whose LANG names a locale the machine lacks makes a C, UTF-8 cluster', async () => {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'svc-embedded-locale-'));
  const names = ['LANG', 'LC_ALL', 'LC_CTYPE', 'LC_COLLATE', 'LC_MESSAGES'] as const;
  const saved = Object.fromEntries(names.map((name) => [name, process.env[name]]));
  // initdb is given this process's environment.
  for (const name of names) delete process.env[name];
  process.env.LANG = 'xx_XX.UTF-8';
  try {
    const cluster = await startEmbeddedPostgres(dataDir);
    try {
      const client = new pg.Client({ connectionString: cluster.url });
      await client.connect();
      try {
        const { rows } = await client.query(
          `select datcollate as collate, datctype as ctype, pg_encoding_to_char(encoding) as encoding,
                  lower('IVAN') as lowered
             from pg_database where datname = current_database()`,
        );
        assert.deepEqual(rows, [{ collate: 'C', ctype: 'C', encoding: 'UTF8', lowered: 'ivan' }]);
      } finally {
        await client.end();
      }
    } finally {
      await cluster.stop();
    }
  } finally {
    for (const name of names) {
      if (saved[name] === undefined) delete process.env[name];
      else process.env[name] = saved[name];
    }
    rmSync(dataDir, { recursive: true, force: true });
  }
});
