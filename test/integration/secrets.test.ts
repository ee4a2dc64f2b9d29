import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { readFileSync, mkdtempSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { sql } from 'kysely';
import { ConfigError, loadConfig } from '../../src/config.ts';
import { verifyPassphrase } from '../../src/lib/passphrase-hash.ts';
import { decryptSecret } from '../../src/lib/secret-box.ts';
import { resolveSecrets } from '../../src/main/secrets.ts';
import { startTestService, type TestService } from '../helpers/test-service.ts';

/**
 * wire-contract §1: API secrets are encrypted at rest with the server key from config and passphrases are
 * scrypt-hashed, so that a database dump alone cannot sign requests.
 */
let svc: TestService;
before(async () => {
  svc = await startTestService();
});
after(() => svc?.close());

test('the api_keys row holds neither the secret nor the passphrase in the clear', async () => {
  const { key } = await svc.newPlatform();
  const row = await svc.runtime.store.db
    .selectFrom('api_keys')
    .selectAll()
    .where('api_key', '=', key.api_key)
    .executeTakeFirstOrThrow();
  const secretBytes = Buffer.from(key.api_secret, 'base64');
  assert.equal(row.secret_ciphertext.includes(secretBytes), false, 'raw secret bytes stored');
  assert.equal(row.secret_ciphertext.includes(Buffer.from(key.api_secret)), false, 'base64 secret stored');
  assert.equal(row.passphrase_hash.includes(key.passphrase), false);
  assert.match(row.passphrase_hash, /^scrypt\$\d+\$\d+\$\d+\$[A-Za-z0-9+/=]+\$[A-Za-z0-9+/=]+$/);

  // The whole row as a dump would show it (every column as text).
  const dump = await sql<{
    row: string;
  }>`select row_to_json(k)::text as row from api_keys k where api_key = ${key.api_key}`.execute(
    svc.runtime.store.db,
  );
  const text = dump.rows[0]!.row;
  for (const clear of [key.api_secret, secretBytes.toString('hex'), key.passphrase]) {
    assert.equal(text.includes(clear), false);
  }
});

test('the stored secret decrypts only with the configured key; the passphrase verifies against the hash', async () => {
  const { key } = await svc.newPlatform();
  const row = await svc.runtime.store.db
    .selectFrom('api_keys')
    .select(['secret_ciphertext', 'passphrase_hash'])
    .where('api_key', '=', key.api_key)
    .executeTakeFirstOrThrow();
  assert.equal(decryptSecret(svc.runtime.secrets.secretKey, row.secret_ciphertext), key.api_secret);
  assert.throws(() => decryptSecret(randomBytes(32), row.secret_ciphertext));
  // Tampering with the ciphertext is detected (authenticated encryption), not decrypted to garbage.
  const tampered = Buffer.from(row.secret_ciphertext);
  tampered[tampered.length - 1] ^= 1;
  assert.throws(() => decryptSecret(svc.runtime.secrets.secretKey, tampered));
  assert.equal(await verifyPassphrase(key.passphrase, row.passphrase_hash), true);
  assert.equal(await verifyPassphrase(key.passphrase + 'x', row.passphrase_hash), false);
});

test('two keys with the same secret would not share a ciphertext (random IV), nor passphrases a hash (salt)', async () => {
  const { platform } = await svc.newPlatform();
  await svc.admin.post(`/platforms/${platform.platform_code}/api_keys`);
  const rows = await svc.runtime.store.db
    .selectFrom('api_keys')
    .select(['secret_ciphertext', 'passphrase_hash'])
    .where('platform_code', '=', platform.platform_code)
    .execute();
  assert.equal(rows.length, 2);
  assert.notDeepEqual(rows[0]!.secret_ciphertext, rows[1]!.secret_ciphertext);
  assert.notEqual(rows[0]!.passphrase_hash.split('$')[4], rows[1]!.passphrase_hash.split('$')[4]);
});

test('the operator API lists keys without secrets; the secret is shown once, at creation', async () => {
  const { platform, key } = await svc.newPlatform();
  const listed = await svc.admin.get<Array<Record<string, unknown>>>(
    `/platforms/${platform.platform_code}/api_keys`,
  );
  assert.equal(listed.length, 1);
  assert.deepEqual(Object.keys(listed[0]!).sort(), [
    'api_key',
    'created_at',
    'last_used_at',
    'platform_code',
    'revoked_at',
  ]);
  assert.equal(JSON.stringify(listed).includes(key.api_secret), false);
  assert.equal(JSON.stringify(listed).includes(key.passphrase), false);
});

test('the encryption key comes from config (SVC_SECRET_KEY), else is generated once in the data dir', async () => {
  const configured = randomBytes(32).toString('base64');
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'svc-secrets-'));
  const fromConfig = await resolveSecrets(loadConfig({ SVC_DATA_DIR: dataDir, SVC_SECRET_KEY: configured }));
  assert.equal(fromConfig.secretKey.toString('base64'), configured);
  assert.equal(fromConfig.fromDataDir.includes('SVC_SECRET_KEY'), false);

  const generated = await resolveSecrets(loadConfig({ SVC_DATA_DIR: dataDir }));
  assert.equal(generated.secretKey.length, 32);
  assert.ok(generated.fromDataDir.includes('SVC_SECRET_KEY'));
  assert.equal(
    readFileSync(path.join(dataDir, 'secret-key'), 'utf8').trim(),
    generated.secretKey.toString('base64'),
  );
  // A restart reads the same key, so the stored secrets still decrypt.
  const again = await resolveSecrets(loadConfig({ SVC_DATA_DIR: dataDir }));
  assert.deepEqual(again.secretKey, generated.secretKey);
  assert.throws(() => loadConfig({ SVC_SECRET_KEY: randomBytes(16).toString('base64') }), /32 bytes/);
});

test('a damaged or hand-made secret file in the data dir stops the start, naming the file', async () => {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'svc-secrets-bad-'));
  const config = loadConfig({ SVC_DATA_DIR: dataDir });
  writeFileSync(path.join(dataDir, 'secret-key'), 'not-a-key\n');
  await assert.rejects(
    resolveSecrets(config),
    (e: unknown) =>
      e instanceof ConfigError &&
      e.message.startsWith(`${path.join(dataDir, 'secret-key')}: must be base64 of exactly 32 bytes`),
  );
  writeFileSync(path.join(dataDir, 'secret-key'), randomBytes(32).toString('base64'));
  for (const token of ['\n', 'short-by-hand\n']) {
    writeFileSync(path.join(dataDir, 'admin-token'), token);
    await assert.rejects(
      resolveSecrets(config),
      (e: unknown) =>
        e instanceof ConfigError &&
        e.message ===
          `${path.join(dataDir, 'admin-token')}: must be at least 24 characters (remove it to have one made)`,
    );
  }
  // Held to SVC_ADMIN_TOKEN's form too: a header cannot carry it (review).
  writeFileSync(path.join(dataDir, 'admin-token'), `${'a'.repeat(23)}é\n`);
  await assert.rejects(
    resolveSecrets(config),
    (e: unknown) =>
      e instanceof ConfigError &&
      e.message ===
        `${path.join(dataDir, 'admin-token')}: must be printable ASCII with no space at either end (remove it to have one made)`,
  );
});
