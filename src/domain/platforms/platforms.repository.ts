import { sql } from 'kysely';
import type { Executor } from '../../store/database.ts';

export function findPlatform(db: Executor, platformCode: string) {
  return db.selectFrom('platforms').selectAll().where('platform_code', '=', platformCode).executeTakeFirst();
}

export function listPlatforms(db: Executor) {
  return db.selectFrom('platforms').selectAll().orderBy('created_at').execute();
}

export function listAllowlists(db: Executor) {
  return db.selectFrom('platforms').select(['platform_code', 'ip_allowlist']).execute();
}

export function findApiKey(db: Executor, apiKey: string) {
  return db.selectFrom('api_keys').selectAll().where('api_key', '=', apiKey).executeTakeFirst();
}

/** Notes a use of the key at `at`; never moves its last use back (another instance may have noted a later one). */
export async function markApiKeyUsed(db: Executor, apiKey: string, at: Date): Promise<void> {
  await db
    .updateTable('api_keys')
    .set({ last_used_at: sql<Date>`greatest(coalesce(last_used_at, ${at}), ${at})` })
    .where('api_key', '=', apiKey)
    .execute();
}

export function listApiKeys(db: Executor, platformCode: string) {
  return db
    .selectFrom('api_keys')
    .select(['api_key', 'platform_code', 'created_at', 'revoked_at', 'last_used_at'])
    .where('platform_code', '=', platformCode)
    .orderBy('created_at')
    .execute();
}

/** The secrets sealed with the server key most recently: the newest API key's and webhook secret's. */
export async function newestSealedSecrets(db: Executor): Promise<Buffer[]> {
  const [apiKey, webhook] = await Promise.all([
    db
      .selectFrom('api_keys')
      .select('secret_ciphertext')
      .orderBy('created_at', 'desc')
      .limit(1)
      .executeTakeFirst(),
    db
      .selectFrom('webhook_endpoints')
      .select('secret_ciphertext')
      .where('secret_ciphertext', 'is not', null)
      .orderBy('updated_at', 'desc')
      .limit(1)
      .executeTakeFirst(),
  ]);
  return [apiKey?.secret_ciphertext, webhook?.secret_ciphertext].filter((s): s is Buffer => !!s);
}
