import { generateKeyPairSync, randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type pino from 'pino';
import { loadConfig } from '../../src/config.ts';
import { AdminClient } from '../../src/cli/admin-client.ts';
import type { IssuedApiKey, Participant, Platform } from '../../src/contract/admin.schemas.ts';
import type { CustomerAccountDetails } from '../../src/contract/accounts.schemas.ts';
import type { DomainDeps } from '../../src/domain/deps.ts';
import type { Clock } from '../../src/lib/clock.ts';
import { createLogger } from '../../src/main/logger.ts';
import { startRuntime, type Runtime } from '../../src/main/runtime.ts';
import { SvcClient } from '../../src/sdk/client.ts';
import { CacheInvalidation } from '../../src/store/cache-invalidation.ts';
import type { Db } from '../../src/store/database.ts';
import { createTestDatabase, type TestDatabase } from './database.ts';
import { rawRequest, type RawResponse } from './probe-app.ts';

export const TEST_ADMIN_TOKEN = 'test-admin-token-0123456789';
export const LOOPBACK = ['127.0.0.1/32', '::1/128'];

export interface TestService {
  runtime: Runtime;
  database: TestDatabase;
  url: string;
  admin: AdminClient;
  /** A platform with an API key and an SDK client signed with it. */
  newPlatform(options?: { allowlist?: string[]; name?: string }): Promise<PlatformFixture>;
  /** A customer participant of the platform (approved unless said otherwise). */
  newParticipant(platformCode: string, options?: { status?: string; email?: string }): Promise<Participant>;
  newCustomerAccount(
    platformCode: string,
    participantCode: string,
    label?: string,
  ): Promise<CustomerAccountDetails>;
  /**
   * What a domain service of another instance of this service would be built with (same configuration and
   * secrets), on `db` and `clock`, with a cache-invalidation bus of its own that the test drives.
   */
  domainDeps(options: { db: Db; clock: Clock }): DomainDeps;
  /**
   * One operator API call answered as is, whatever its status (`admin` throws on a refusal): for tests of
   * the refusals. `path` is below /admin; `body` is sent as JSON.
   */
  operatorCall(method: string, path: string, body?: unknown): Promise<RawResponse>;
  close(): Promise<void>;
}

export interface PlatformFixture {
  platform: Platform;
  key: IssuedApiKey;
  client: SvcClient;
}

let counter = 0;

/**
 * The real service (the same assembly as `svc serve`) on a fresh database and a free port.
 * `env` overrides configuration; the worker does not run unless SVC_ROLE says so. `icuLocale` gives the database
 * that default collation (createTestDatabase).
 */
export async function startTestService(
  options: { env?: Record<string, string>; clock?: Clock; logger?: pino.Logger; icuLocale?: string } = {},
): Promise<TestService> {
  const database = await createTestDatabase({ icuLocale: options.icuLocale });
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'svc-test-'));
  const config = loadConfig({
    SVC_ENV: 'cert',
    SVC_ROLE: 'api',
    SVC_HOST: '127.0.0.1',
    SVC_PORT: '0',
    SVC_DATA_DIR: dataDir,
    DATABASE_URL: database.url,
    SVC_ADMIN_TOKEN: TEST_ADMIN_TOKEN,
    SVC_SECRET_KEY: randomBytes(32).toString('base64'),
    SVC_JWT_PRIVATE_KEY: generateKeyPairSync('ec', { namedCurve: 'P-256' })
      .privateKey.export({ type: 'pkcs8', format: 'pem' })
      .toString(),
    SVC_LOG_LEVEL: 'silent',
    SVC_WORKER_POLL_INTERVAL_MS: '100',
    // Closing lets webhook attempts under way finish for 2/3 of this: a test's close waits 1 s at most.
    SVC_SHUTDOWN_TIMEOUT_MS: '1500',
    ...options.env,
  });
  const runtime = await startRuntime(config, {
    clock: options.clock,
    logger: options.logger ?? createLogger(config.logLevel),
  });
  const url = runtime.url ?? runtime.adminUrl ?? '';
  const admin = new AdminClient(runtime.adminUrl ?? url, TEST_ADMIN_TOKEN);
  const clientNow = options.clock ? () => options.clock!.now() : undefined;

  const service: TestService = {
    runtime,
    database,
    url,
    admin,
    async newPlatform(opts = {}) {
      const platform = await admin.post<Platform>('/platforms', {
        name: opts.name ?? `Test platform ${++counter}`,
        ip_allowlist: opts.allowlist ?? LOOPBACK,
      });
      const key = await admin.post<IssuedApiKey>(`/platforms/${platform.platform_code}/api_keys`);
      const client = new SvcClient({
        baseUrl: url,
        apiKey: key.api_key,
        apiSecret: key.api_secret,
        passphrase: key.passphrase,
        now: clientNow,
      });
      return { platform, key, client };
    },
    async newParticipant(platformCode, opts = {}) {
      const n = ++counter;
      return admin.post<Participant>('/participants', {
        platform_code: platformCode,
        email: opts.email ?? `person${n}.${randomBytes(3).toString('hex')}@example.com`,
        first_name: 'Test',
        last_name: `Person${n}`,
        status: opts.status,
      });
    },
    async newCustomerAccount(platformCode, participantCode, label) {
      return admin.post<CustomerAccountDetails>('/customer_accounts', {
        platform_code: platformCode,
        participant_code: participantCode,
        account_label: label,
      });
    },
    domainDeps({ db, clock }) {
      return {
        db,
        clock,
        config: runtime.config,
        secretKey: runtime.secrets.secretKey,
        jwtPrivateKeyPem: runtime.secrets.jwtPrivateKeyPem,
        cache: new CacheInvalidation(null),
      };
    },
    operatorCall(method, path, body) {
      return rawRequest(runtime.adminUrl ?? url, method, `/admin${path}`, {
        headers: {
          authorization: `Bearer ${TEST_ADMIN_TOKEN}`,
          ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        },
        body: body === undefined ? undefined : JSON.stringify(body),
      });
    },
    async close() {
      await runtime.close();
      await database.drop();
      rmSync(dataDir, { recursive: true, force: true });
    },
  };
  return service;
}
