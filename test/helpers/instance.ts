import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type pino from 'pino';
import { loadConfig } from '../../src/config.ts';
import type { Clock } from '../../src/lib/clock.ts';
import { createLogger } from '../../src/main/logger.ts';
import { startRuntime, type Runtime } from '../../src/main/runtime.ts';
import { TEST_ADMIN_TOKEN, type TestService } from './test-service.ts';

/**
 * Another instance of a test service's deployment: its own process state (caches, pool, listeners) on
 * the same database and with the same configured secrets, as a second `svc serve` behind a load balancer
 * would be. `databaseUrl` reaches the same database another way (e.g. through a TCP proxy).
 */
export function startInstance(
  svc: TestService,
  options: { databaseUrl?: string; clock?: Clock; logger?: pino.Logger; env?: Record<string, string> } = {},
): Promise<Runtime> {
  const config = loadConfig({
    SVC_ENV: svc.runtime.config.env,
    SVC_ROLE: 'api',
    SVC_HOST: '127.0.0.1',
    SVC_PORT: '0',
    SVC_DATA_DIR: mkdtempSync(path.join(os.tmpdir(), 'svc-test-')),
    DATABASE_URL: options.databaseUrl ?? svc.database.url,
    SVC_ADMIN_TOKEN: TEST_ADMIN_TOKEN,
    SVC_SECRET_KEY: svc.runtime.secrets.secretKey.toString('base64'),
    SVC_JWT_PRIVATE_KEY: svc.runtime.secrets.jwtPrivateKeyPem,
    ...options.env,
  });
  return startRuntime(config, { clock: options.clock, logger: options.logger ?? createLogger('silent') });
}
