import { decryptSecret } from '../../lib/secret-box.ts';
import type { Db } from '../../store/database.ts';
import { newestSealedSecrets } from './platforms.repository.ts';

/**
 * Whether `secretKey` opens the secrets this database holds (the newest API key's and webhook secret's), or
 * there are none yet. An instance started with another SVC_SECRET_KEY than the one that sealed them (a typo,
 * a half-done rotation, the wrong entry of a secret store) otherwise started, answered ready, and failed
 * every signed request with a 500 (review).
 */
export async function secretKeyOpensStoredSecrets(db: Db, secretKey: Buffer): Promise<boolean> {
  for (const sealed of await newestSealedSecrets(db)) {
    try {
      decryptSecret(secretKey, sealed);
    } catch {
      return false;
    }
  }
  return true;
}
