import { setTimeout as sleep } from 'node:timers/promises';
import type { FastifyInstance } from 'fastify';
import type { Runner } from 'graphile-worker';
import type pino from 'pino';
import { Registry, collectDefaultMetrics } from 'prom-client';
import { buildApp, type AppDeps, type AppParts } from '../app.ts';
import { ConfigError, publicListenerExposures, type Config } from '../config.ts';
import type { DomainDeps } from '../domain/deps.ts';
import { registerRateLimitMetrics } from '../domain/ratelimit/rate-limit.metrics.ts';
import { listenOn } from '../http/listening.ts';
import { registerJobMetrics } from '../jobs/job-metrics.ts';
import { createRateLimiter, RedisDatabaseError } from '../domain/ratelimit/rate-limiter.service.ts';
import { secretKeyOpensStoredSecrets } from '../domain/platforms/secret-key-check.ts';
import { createServices, type Services } from '../domain/services.ts';
import { buildTaskList, cronItems, keyedTasks } from '../jobs/task-list.ts';
import { startWorker } from '../jobs/worker-runtime.ts';
import { systemClock, type Clock } from '../lib/clock.ts';
import { CacheInvalidation } from '../store/cache-invalidation.ts';
import { PgListener } from '../store/pg-listener.ts';
import { createStore, type Store } from '../store/database.ts';
import { refuseSharedSessions } from '../store/session-check.ts';
import {
  startEmbeddedPostgres,
  type EmbeddedDatabase,
  type EmbeddedOptions,
} from '../store/embedded-postgres.ts';
import { migrate } from '../store/migrate.ts';
import { createLogger } from './logger.ts';
import { resolveSecrets, type ServerSecrets } from './secrets.ts';

/**
 * Everything a process runs, assembled from config: the database (embedded unless DATABASE_URL is set),
 * migrations, services, the HTTP listeners (role api/all) and the job worker (role worker/all).
 */
export interface Runtime {
  config: Readonly<Config>;
  logger: pino.Logger;
  store: Store;
  services: Services;
  secrets: ServerSecrets;
  databaseUrl: string;
  apps: FastifyInstance[];
  /** What the HTTP apps were built from (null when this process serves no HTTP), for tests and benchmarks. */
  appDeps: AppDeps | null;
  /** Where the public API listens (when this process serves it). */
  url: string | null;
  adminUrl: string | null;
  /** Where a worker-role process serves /healthz, /readyz and /metrics (SVC_OPS_LISTEN), if it does. */
  opsUrl: string | null;
  worker: Runner | null;
  /**
   * Stops everything. With `drainMs` (SIGTERM, SVC_SHUTDOWN_DRAIN_MS), a process serving the API first goes
   * on serving for that long while /readyz answers 503 and every answer closes its connection. `askedAgoMs`: the
   * stop was asked that long ago (during the start), and the shutdown's shares (the webhook attempts') count from
   * then, as its bound does.
   */
  close(options?: { drainMs?: number; askedAgoMs?: number }): Promise<void>;
}

export interface RuntimeOptions {
  clock?: Clock;
  logger?: pino.Logger;
  /** Start listeners (serve) or only prepare the database (migrate). */
  listen?: boolean;
}

export async function openDatabase(
  config: Readonly<Config>,
  logger: pino.Logger,
  options: EmbeddedOptions = {},
): Promise<{ url: string; embedded: EmbeddedDatabase | null }> {
  if (config.databaseUrl) return { url: config.databaseUrl, embedded: null };
  const embedded = await startEmbeddedPostgres(config.dataDir, (msg) => logger.info(msg), options);
  logger.info({ dataDir: config.dataDir }, 'embedded PostgreSQL started');
  return { url: embedded.url, embedded };
}

/** Closes every app at once; fails with the first failure once all have closed. */
async function closedTogether(apps: FastifyInstance[]): Promise<void> {
  const failed = (await Promise.allSettled(apps.map((app) => app.close()))).find(
    (result) => result.status === 'rejected',
  );
  if (failed) throw failed.reason;
}

/** The share of SVC_SHUTDOWN_TIMEOUT_MS (from the start of the shutdown) that in-flight webhook attempts get. */
const SHUTDOWN_DRAIN_SHARE = 2 / 3;

export async function startRuntime(config: Readonly<Config>, options: RuntimeOptions = {}): Promise<Runtime> {
  const logger = options.logger ?? createLogger(config.logLevel);
  const clock = options.clock ?? systemClock;
  // The runtime stops the cluster itself, last, on every signal (the entry point's shutdown).
  const { url: databaseUrl, embedded } = await openDatabase(config, logger, { ownProcessGroup: true });
  const store = createStore(databaseUrl, { max: config.databasePoolMax });
  // One LISTEN connection per process, for every channel (cache invalidation; webhook wake-ups in workers).
  const listener = new PgListener(databaseUrl, { logger });
  const cache = new CacheInvalidation(listener);
  const cleanups: Array<() => Promise<unknown>> = [];
  let closingSince = 0;
  let draining = false;
  /** Stops the job runner and webhook delivery of a worker-role process (once; see below). */
  let stopWork: (() => Promise<unknown>) | null = null;
  const closeAll = async () => {
    // From the start of the shutdown, the drain included: the process must be gone within the timeout.
    closingSince ||= performance.now();
    for (const cleanup of cleanups.reverse())
      await cleanup().catch((err) => logger.error({ err }, 'shutdown step failed'));
  };
  cleanups.push(async () => embedded?.stop());
  cleanups.push(() => store.close());
  try {
    await refuseSharedSessions(store.pool);
    await migrate(store.pool, logger, { lockTimeoutMs: config.migrationLockTimeoutMs });
    const secrets = await resolveSecrets(config);
    if (config.databaseUrl && secrets.fromDataDir.length > 0) {
      logger.warn(
        { generated: secrets.fromDataDir },
        'secrets taken from the local data dir: set them in the environment so that every instance agrees',
      );
    }
    for (const exposure of publicListenerExposures(config)) logger.warn({ listen: config.listen }, exposure);
    if (config.unreadSettings.length > 0) {
      logger.warn(
        { variables: config.unreadSettings },
        'environment variables svc does not read are ignored: a misspelt setting keeps its default',
      );
    }
    if (!(await secretKeyOpensStoredSecrets(store.db, secrets.secretKey))) {
      const source = secrets.fromDataDir.includes('SVC_SECRET_KEY')
        ? `the key generated in ${config.dataDir}`
        : 'the key set';
      throw new ConfigError(
        `SVC_SECRET_KEY: ${source} does not decrypt the API and webhook secrets stored in this database; start every instance with the key that stored them`,
      );
    }
    await listener.start();
    cleanups.push(() => listener.stop());
    await cache.start();
    cleanups.push(() => cache.stop());
    const deps: DomainDeps = {
      db: store.db,
      clock,
      config,
      secretKey: secrets.secretKey,
      jwtPrivateKeyPem: secrets.jwtPrivateKeyPem,
      jwtPreviousKeyPem: config.jwtPreviousKey,
      cache,
    };
    const services = createServices(deps);
    const metrics = new Registry();
    collectDefaultMetrics({ register: metrics });
    services.webhooks.registerMetrics(metrics);
    const taskList = buildTaskList(services);
    registerJobMetrics(metrics, store.db, Object.keys(taskList));

    // The worker side's cleanups go here, before the listeners' (cleanups run in reverse): at shutdown the listeners
    // stop taking connections first, while the worker side drains, as before its start moved after them (review).
    const workerCleanupsAt = cleanups.length;
    const apps: FastifyInstance[] = [];
    /** Builds an app of `parts`, closed at shutdown, listening on `at`; returns its URL. */
    const serve = async (deps: AppDeps, parts: AppParts, at: { host: string; port: number }) => {
      const app = await buildApp(deps, parts);
      apps.push(app);
      // Every listener stops taking connections at once, each then waiting for its own requests in flight.
      // Closed one after the other, the public listener went on taking new connections, and serving them, for
      // as long as a slow operator request held the operator listener's close (probe).
      if (apps.length === 1) cleanups.push(() => closedTogether(apps));
      // A copy: fastify writes into its options, and config is frozen.
      return listenOn(app, { host: at.host, port: at.port });
    };
    const baseDeps: AppDeps = {
      config,
      store,
      services,
      clock,
      logger,
      metrics,
      adminToken: secrets.adminToken,
      draining: () => draining,
    };
    let url: string | null = null;
    let adminUrl: string | null = null;
    let opsUrl: string | null = null;
    let appDeps: AppDeps | null = null;
    if (config.role === 'worker' && config.opsListen && options.listen !== false) {
      // No API here: only the ops routes (/healthz, /readyz, /metrics), so that the delivery histograms and
      // the job runner's process metrics of worker-only processes can be scraped.
      appDeps = baseDeps;
      opsUrl = await serve(appDeps, { public: false, admin: false }, config.opsListen);
    }
    if (config.role !== 'worker' && options.listen !== false) {
      // wire-contract §2.3: one limiter per process, shared by its listeners; with REDIS_URL, by every instance.
      const rateLimiter = await createRateLimiter({
        redisUrl: config.redisUrl,
        policy: config.rateLimit,
        keyPrefix: config.rateLimit.redisKeyPrefix,
        redisOptions: { commandTimeout: config.rateLimit.redisTimeoutMs },
        // A test's clock; else the limiter's own, monotonic: blocks must not follow a step of the wall clock.
        clock: options.clock,
        logger: logger.child({ component: 'rate-limit' }),
      }).catch((err: unknown) => {
        throw err instanceof RedisDatabaseError ? new ConfigError(`REDIS_URL: ${err.message}`) : err;
      });
      cleanups.push(() => rateLimiter.close());
      registerRateLimitMetrics(metrics, rateLimiter);
      appDeps = {
        ...baseDeps,
        rateLimiter,
        // DESIGN §6: ready means the database and, when configured, Redis answer.
        readiness: config.redisUrl
          ? [{ name: 'redis', required: false, check: () => rateLimiter.sharedReachable() }]
          : [],
      };
      // With SVC_OPS_LISTEN, the probes and the metrics are served there only, off the public listener
      // (where anyone could read the metrics and call /readyz, which costs a database statement).
      const ops = config.opsListen === null;
      url = await serve(appDeps, { public: true, admin: config.adminListen === null, ops }, config.listen);
      adminUrl = config.adminListen
        ? await serve(appDeps, { public: false, admin: true, ops }, config.adminListen)
        : url;
      if (config.opsListen) {
        opsUrl = await serve(appDeps, { public: false, admin: false }, config.opsListen);
      }
    }

    // The worker side starts once every listener is bound: a start that fails on a taken port had migrated, then
    // taken webhook partitions and started jobs before it failed, competing with the running workers for a moment
    // (review). Jobs enqueued by the first requests meanwhile wait for it, as for any busy worker.
    let worker: Runner | null = null;
    if (config.role !== 'api') {
      // Webhook delivery's dispatcher (issue 4) runs beside the job runner: both stop taking work at once, and
      // the dispatcher closes its connections after the runner has stopped (cleanups run in reverse order).
      const webhookWorker = services.webhooks.delivery.startWorkerSide(logger, { databaseUrl, listener });
      cleanups.splice(workerCleanupsAt, 0, () => webhookWorker.close());
      worker = await startWorker({
        pool: store.pool,
        taskList,
        cronItems,
        keyedTasks,
        concurrency: config.worker.concurrency,
        pollIntervalMs: config.worker.pollIntervalMs,
        logger,
      });
      const running = worker;
      // Webhook attempts under way may finish until SHUTDOWN_DRAIN_SHARE of the shutdown time has passed; the
      // jobs under way are waited for meanwhile, not after; the rest of the time is for the attempts' records,
      // the connections and an embedded PostgreSQL.
      // Settled, not all: the connections close (next cleanup) only once both have stopped, even if one failed.
      // Begun at the start of the shutdown, before an HTTP drain (SVC_SHUTDOWN_DRAIN_MS), which is for the
      // load balancer: the worker side stops taking work at the signal, and its share runs from then.
      let workStopped: Promise<unknown> | null = null;
      stopWork = () =>
        (workStopped ??= Promise.allSettled([
          webhookWorker.stopIntake({
            // Whole ms: it is logged ("drainMs: 6666.66…" read oddly, review).
            drainMs: Math.max(
              0,
              Math.floor(closingSince + config.shutdownTimeoutMs * SHUTDOWN_DRAIN_SHARE - performance.now()),
            ),
          }),
          running.stop(),
        ]));
      cleanups.splice(workerCleanupsAt + 1, 0, stopWork);
    }

    return {
      config,
      logger,
      store,
      services,
      secrets,
      databaseUrl,
      apps,
      appDeps,
      url,
      adminUrl,
      opsUrl,
      worker,
      async close({ drainMs = 0, askedAgoMs = 0 } = {}) {
        closingSince = performance.now() - askedAgoMs;
        // At the signal, not after the drain or the requests in flight: the worker side stops taking work now
        // (its attempts under way get their share of the shutdown, counted from the signal).
        void stopWork?.();
        if (drainMs > 0 && url !== null) {
          draining = true;
          logger.info({ drainMs }, 'draining: /readyz answers 503, answers close their connections');
          await sleep(drainMs);
        }
        await closeAll();
      },
    };
  } catch (error) {
    await closeAll();
    throw error;
  }
}
