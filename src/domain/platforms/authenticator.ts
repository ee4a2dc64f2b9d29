import { createHash, timingSafeEqual } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import { signatureMatches, signingMessage } from '../../contract/request-signature.ts';
import { verifyPassphrase } from '../../lib/passphrase-hash.ts';
import { decryptSecret } from '../../lib/secret-box.ts';
import type { DomainDeps } from '../deps.ts';
import { unauthenticated } from '../errors.ts';
import { findApiKey, markApiKeyUsed } from './platforms.repository.ts';

/**
 * wire-contract §1 API-key authentication. Decrypting a secret and checking an scrypt hash are too slow for
 * the hot path, so verified keys are cached in memory (bounded, with a TTL) and dropped on revocation on
 * every instance through the cache-invalidation bus; while that bus may be missing revocations, each use of a
 * cached key reads its revocation from the database.
 */
export interface SignedRequest {
  apiKey: string | undefined;
  signature: string | undefined;
  timestamp: string | undefined;
  passphrase: string | undefined;
  method: string;
  /** The request target exactly as received: path plus ?query, not re-encoded. */
  route: string;
  rawBody: Buffer | undefined;
}

export interface Caller {
  platformCode: string;
  apiKey: string;
}

interface CachedKey {
  platformCode: string;
  secret: string;
  passphraseHash: string;
  /** sha256 of a passphrase already verified against the scrypt hash. */
  verifiedPassphrase: Buffer | null;
  /** scrypt checks under way, by sha256 of the presented passphrase. */
  verifying: Map<string, Promise<boolean>>;
  revoked: boolean;
  loadedAt: number;
  /** When this instance last noted the key's use in the database (clock ms); null: not yet. */
  useNotedAt: number | null;
}

/** How often an instance notes a key's use: last_used_at is to the minute, and costs one write a minute per key. */
export const USE_NOTED_EVERY_MS = 60_000;

const TIMESTAMP_TOLERANCE_S = 60;
const CACHE_MAX_ENTRIES = 10_000;
const CACHE_TTL_MS = 5 * 60_000;

export interface AuthenticatorOptions {
  /** Keys kept verified in memory at most (10,000); past it, the one used least recently goes. */
  cacheMaxEntries?: number;
}

export function createAuthenticator(deps: DomainDeps, options: AuthenticatorOptions = {}) {
  // Least recently used first out: kept in the order they were first loaded, a deployment with more keys in use
  // than the bound dropped its busiest key as readily as an idle one, and paid its scrypt check again. The TTL is
  // checked here (loadedAt) rather than by lru-cache, so that it follows the service's clock.
  const cache = new LRUCache<string, CachedKey>({ max: options.cacheMaxEntries ?? CACHE_MAX_ENTRIES });
  const loading = new Map<string, Promise<CachedKey | null>>();

  /**
   * Counts invalidations. A load that started before one read the key as it was then (say, not yet
   * revoked): its entry is not cached, and requests arriving after the invalidation start a load of their own.
   */
  let generation = 0;
  deps.cache.subscribe((event) => {
    if (event.type === 'api_key_revoked') {
      generation++;
      cache.delete(event.api_key);
      loading.delete(event.api_key);
    } else if (event.type === 'all') {
      generation++;
      cache.clear();
      loading.clear();
    }
  });

  /**
   * A cached key used while revocations may not reach this instance (cache-invalidation `hearing`): its row is
   * read again for the revocation, one primary-key look-up a request; the decrypted secret and the verified
   * passphrase stay cached (a key's secret and passphrase never change).
   */
  async function confirmed(apiKey: string, entry: CachedKey): Promise<CachedKey | null> {
    const row = await findApiKey(deps.db, apiKey);
    if (!row) {
      cache.delete(apiKey);
      return null;
    }
    if (row.revoked_at !== null) entry.revoked = true;
    return entry;
  }

  async function load(apiKey: string): Promise<CachedKey | null> {
    const hit = cache.get(apiKey);
    if (hit && deps.clock.now() - hit.loadedAt < CACHE_TTL_MS) {
      return deps.cache.hearing() ? hit : confirmed(apiKey, hit);
    }
    let pending = loading.get(apiKey);
    if (!pending) {
      const started = generation;
      pending = (async () => {
        const row = await findApiKey(deps.db, apiKey);
        if (!row) return null;
        const entry: CachedKey = {
          platformCode: row.platform_code,
          secret: decryptSecret(deps.secretKey, row.secret_ciphertext),
          passphraseHash: row.passphrase_hash,
          verifiedPassphrase: null,
          verifying: new Map(),
          revoked: row.revoked_at !== null,
          loadedAt: deps.clock.now(),
          useNotedAt: null,
        };
        if (started !== generation) return entry;
        cache.set(apiKey, entry);
        return entry;
      })().finally(() => {
        if (loading.get(apiKey) === pending) loading.delete(apiKey);
      });
      loading.set(apiKey, pending);
    }
    return pending;
  }

  /**
   * Notes the key's use in the database at most once per USE_NOTED_EVERY_MS on this instance (`svc keys list`'s
   * last_used_at: is a key about to be revoked still in use? was a leaked one used?). A failure is not the request's:
   * the use is noted by a later one.
   */
  async function noteUse(apiKey: string, entry: CachedKey): Promise<void> {
    const now = deps.clock.now();
    if (entry.useNotedAt !== null && now - entry.useNotedAt < USE_NOTED_EVERY_MS) return;
    entry.useNotedAt = now;
    await markApiKeyUsed(deps.db, apiKey, new Date(now)).catch(() => {
      entry.useNotedAt = null;
    });
  }

  async function passphraseMatches(entry: CachedKey, passphrase: string): Promise<boolean> {
    const digest = createHash('sha256').update(passphrase).digest();
    if (entry.verifiedPassphrase) return timingSafeEqual(entry.verifiedPassphrase, digest);
    // A burst of requests on a cold key shares one scrypt run per presented passphrase instead of each
    // paying ~50 ms of CPU for the same answer.
    const id = digest.toString('hex');
    let pending = entry.verifying.get(id);
    if (!pending) {
      pending = verifyPassphrase(passphrase, entry.passphraseHash).finally(() => entry.verifying.delete(id));
      entry.verifying.set(id, pending);
    }
    if (!(await pending)) return false;
    entry.verifiedPassphrase = digest;
    return true;
  }

  return {
    async authenticate(req: SignedRequest): Promise<Caller> {
      if (!req.apiKey) throw unauthenticated('missing header X-SCX-API-KEY');
      if (!req.signature) throw unauthenticated('missing header X-SCX-SIGNED');
      if (!req.timestamp) throw unauthenticated('missing header X-SCX-TIMESTAMP');
      if (!req.passphrase) throw unauthenticated('missing header X-SCX-PASSPHRASE');
      if (!/^\d{1,12}$/.test(req.timestamp))
        throw unauthenticated('X-SCX-TIMESTAMP must be Unix time in seconds');
      // In milliseconds: the server's time floored to the second let a timestamp up to 60.999 s old through.
      const skewMs = Math.abs(deps.clock.now() - Number(req.timestamp) * 1000);
      if (skewMs > TIMESTAMP_TOLERANCE_S * 1000)
        throw unauthenticated('X-SCX-TIMESTAMP is more than 60 seconds from server time');
      const entry = await load(req.apiKey);
      if (!entry) throw unauthenticated('unknown API key');
      if (entry.revoked) throw unauthenticated('API key revoked');
      const message = signingMessage(req.timestamp, req.method, req.route, req.rawBody);
      if (!signatureMatches(entry.secret, message, req.signature)) throw unauthenticated('invalid signature');
      if (!(await passphraseMatches(entry, req.passphrase))) throw unauthenticated('invalid passphrase');
      await noteUse(req.apiKey, entry);
      return { platformCode: entry.platformCode, apiKey: req.apiKey };
    },
  };
}

export type Authenticator = ReturnType<typeof createAuthenticator>;
