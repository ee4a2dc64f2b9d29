import type { Config } from '../config.ts';
import type { Clock } from '../lib/clock.ts';
import type { CacheInvalidation } from '../store/cache-invalidation.ts';
import type { Db } from '../store/database.ts';

/** What every domain service is built from. */
export interface DomainDeps {
  db: Db;
  clock: Clock;
  config: Readonly<Config>;
  /** 32-byte key that encrypts API secrets at rest. */
  secretKey: Buffer;
  /** PKCS#8 PEM of the key that signs Account Funding SDK tokens (wire-contract §6). */
  jwtPrivateKeyPem: string;
  /** PKCS#8 PEM of the key it replaced (SVC_JWT_PREVIOUS_KEY): verified and published, never signing. */
  jwtPreviousKeyPem?: string;
  cache: CacheInvalidation;
}
