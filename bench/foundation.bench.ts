/**
 * Foundation throughput (issue 2 "Speed"): requests/s and p99 latency of
 *   (a) a bare Fastify route doing one simple SELECT on PostgreSQL (no logging, no plugins), and
 *   (b) an authenticated public route doing the same SELECT through the full stack: firewall, rate limit,
 *       signature check, allow-list, input checks, schema validation, the ownership-scoped read, response
 *       serialisation, request logging (production level) and metrics,
 * in one run, on the same PostgreSQL, at the same concurrency; then b/a (goal ≥ 0.6). For reference it also
 * measures the product's own GET /accounts/{zrn}/details (two reads: the account and its tenants).
 *
 *   node --import tsx bench/foundation.bench.ts
 *
 * DATABASE_URL: the PostgreSQL to use (a scratch database is created in it and dropped); unset → an
 * embedded PostgreSQL in a temp dir. BENCH_CONCURRENCY (32), BENCH_SECONDS per round (3), BENCH_ROUNDS (7),
 * SVC_LOG_LEVEL (info, the production default), BENCH_TARGETS (a,b,details). Each round measures a, b, … back
 * to back; figures are medians over rounds and b/a is the median of the per-round ratios, so drift on a
 * shared machine weighs on both sides alike. The load runs in a worker thread, the servers in
 * the main thread.
 */
import { median, startTsxWorker } from './bench-support.ts';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { isMainThread, parentPort } from 'node:worker_threads';
import Fastify, { type FastifyInstance } from 'fastify';
import pg from 'pg';
import pino from 'pino';
import { Registry } from 'prom-client';
import { Type, type Static } from 'typebox';
import { Pool } from 'undici';
import { buildApp } from '../src/app.ts';
import { loadConfig } from '../src/config.ts';
import { ZRN_PATTERN } from '../src/contract/identifiers.ts';
import { AUTH_HEADERS, signRequest, signingMessage } from '../src/contract/request-signature.ts';
import { forbidden, notFound } from '../src/domain/errors.ts';
import { callerOf } from '../src/http/request-context.ts';
import { createLogger } from '../src/main/logger.ts';
import { startRuntime } from '../src/main/runtime.ts';
import { startEmbeddedPostgres } from '../src/store/embedded-postgres.ts';

interface LoadJob {
  url: string;
  path: string;
  seconds: number;
  concurrency: number;
  /** Present for the signed routes: the key signs each request with the current second. */
  key?: { api_key: string; api_secret: string; passphrase: string };
}

interface LoadResult {
  requests: number;
  /** Every request sent, warm-up included. */
  sent: number;
  /** Main-thread (servers') event-loop active time per request sent, in µs: set by the main thread. */
  serverUs?: number;
  rps: number;
  p50: number;
  p99: number;
  statuses: Record<string, number>;
}

// ---------------------------------------------------------------- load generator (worker thread)

async function runLoad(job: LoadJob): Promise<LoadResult> {
  const pool = new Pool(job.url, { connections: job.concurrency, pipelining: 1 });
  const latencies: number[] = [];
  const statuses: Record<string, number> = {};
  let signedAt = -1;
  let headers: Record<string, string> = {};
  const headersNow = () => {
    if (!job.key) return headers;
    const second = Math.floor(Date.now() / 1000);
    if (second !== signedAt) {
      const timestamp = String(second);
      headers = {
        [AUTH_HEADERS.apiKey]: job.key.api_key,
        [AUTH_HEADERS.signed]: signRequest(
          job.key.api_secret,
          signingMessage(timestamp, 'GET', job.path, undefined),
        ),
        [AUTH_HEADERS.timestamp]: timestamp,
        [AUTH_HEADERS.passphrase]: job.key.passphrase,
      };
      signedAt = second;
    }
    return headers;
  };
  const warmupEnds = performance.now() + 1000;
  const ends = warmupEnds + job.seconds * 1000;
  let measuredFrom = 0;
  let sent = 0;
  const loop = async () => {
    for (;;) {
      const started = performance.now();
      if (started >= ends) return;
      const res = await pool.request({ path: job.path, method: 'GET', headers: headersNow() });
      await res.body.dump();
      sent++;
      const finished = performance.now();
      if (started >= warmupEnds) {
        if (measuredFrom === 0) measuredFrom = started;
        latencies.push(finished - started);
        statuses[res.statusCode] = (statuses[res.statusCode] ?? 0) + 1;
      }
    }
  };
  await Promise.all(Array.from({ length: job.concurrency }, loop));
  await pool.close();
  latencies.sort((x, y) => x - y);
  const at = (q: number) =>
    latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))] ?? NaN;
  return {
    requests: latencies.length,
    sent,
    rps: latencies.length / (job.seconds || 1),
    p50: at(0.5),
    p99: at(0.99),
    statuses,
  };
}

if (!isMainThread) {
  parentPort!.on('message', (job: LoadJob) => {
    void runLoad(job).then((result) => parentPort!.postMessage(result));
  });
}

// ---------------------------------------------------------------- servers and the run (main thread)

/** The read both sides do: one row of the caller's platform, by primary key, scoped in SQL. */
const SELECT_ACCOUNT =
  'select zrn, participant_code, account_label, status from customer_accounts where zrn = $1 and platform_code = $2';

async function bareApp(
  databaseUrl: string,
  platformCode: string,
): Promise<{ app: FastifyInstance; pool: pg.Pool }> {
  const pool = new pg.Pool({ connectionString: databaseUrl, max: 20 });
  // pool.end() resolves before its sockets close; the database is dropped right after, so a closing client
  // may still hear "terminating connection", which must not crash the run.
  pool.on('error', () => {});
  pool.on('connect', (client) => client.on('error', () => {}));
  const app = Fastify({ logger: false });
  app.get<{ Params: { zrn: string } }>('/bare/:zrn', async (request, reply) => {
    const { rows } = await pool.query(SELECT_ACCOUNT, [request.params.zrn, platformCode]);
    if (!rows[0]) return reply.code(404).send({ error: 'Not Found' });
    return { message: rows[0] };
  });
  return { app, pool };
}

const AccountParams = Type.Object({ zrn: Type.String({ pattern: ZRN_PATTERN }) });
const AccountRead = Type.Object({
  message: Type.Object({
    zrn: Type.String(),
    participant_code: Type.String(),
    account_label: Type.String(),
    status: Type.String(),
  }),
});

async function main() {
  const concurrency = Number(process.env.BENCH_CONCURRENCY ?? 32);
  const seconds = Number(process.env.BENCH_SECONDS ?? 3);
  const rounds = Number(process.env.BENCH_ROUNDS ?? 7);
  const logLevel = process.env.SVC_LOG_LEVEL ?? 'info';

  // One PostgreSQL for both sides.
  let serverUrl = process.env.DATABASE_URL;
  let stopEmbedded: (() => Promise<void>) | null = null;
  if (!serverUrl) {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'svc-bench-pg-'));
    const embedded = await startEmbeddedPostgres(dir);
    serverUrl = embedded.url;
    stopEmbedded = async () => {
      await embedded.stop();
      rmSync(dir, { recursive: true, force: true });
    };
  }
  const dbName = `svc_bench_${randomBytes(4).toString('hex')}`;
  const admin = new pg.Client({ connectionString: serverUrl });
  await admin.connect();
  await admin.query(`create database ${dbName}`);
  const databaseUrl = Object.assign(new URL(serverUrl), { pathname: `/${dbName}` }).toString();

  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'svc-bench-'));
  // Production logging: JSON lines at SVC_LOG_LEVEL, written asynchronously (here to /dev/null).
  const logger = createLogger(logLevel, pino.destination({ dest: '/dev/null', sync: false }));
  const runtime = await startRuntime(
    loadConfig({
      DATABASE_URL: databaseUrl,
      SVC_ROLE: 'api',
      SVC_PORT: '0',
      SVC_DATA_DIR: dataDir,
      SVC_ENV: 'prod',
      SVC_LOG_LEVEL: logLevel,
      // The limiter runs on every request; the window is short so one IP's accept log stays small.
      SVC_RATE_LIMIT: '1000000000',
      SVC_RATE_LIMIT_WINDOW_MS: '1000',
    }),
    { logger },
  );
  const { services } = runtime;
  const platform = await services.platforms.create({
    name: 'bench',
    ip_allowlist: ['127.0.0.1/32', '::1/128'],
  });
  const key = await services.platforms.createApiKey(platform.platform_code);
  const holder = await services.participants.create({
    platform_code: platform.platform_code,
    email: 'bench@example.com',
    first_name: 'Bench',
    last_name: 'Mark',
  });
  const account = await services.customerAccounts.create({
    platform_code: platform.platform_code,
    participant_code: holder.participant_code,
  });

  // (b): the same read as a route of the public API (registered in the authenticated scope).
  const full = await buildApp(
    {
      ...runtime.appDeps!,
      metrics: new Registry(),
      extraPublicRoutes: async (app) => {
        app.get<{ Params: Static<typeof AccountParams> }>(
          '/bench/accounts/:zrn',
          { schema: { params: AccountParams, response: { 200: AccountRead } } },
          async (request) => {
            const caller = callerOf(request).platformCode;
            const result = await runtime.store.pool.query(SELECT_ACCOUNT, [request.params.zrn, caller]);
            if (result.rows[0]) return { message: result.rows[0] };
            // Ownership (spec 5.4): another platform's account is 403, none is 404.
            const other = await runtime.store.pool.query('select 1 from customer_accounts where zrn = $1', [
              request.params.zrn,
            ]);
            throw other.rowCount ? forbidden('account of another platform') : notFound();
          },
        );
      },
    },
    { public: true, admin: false },
  );
  const fullUrl = await full.listen({ host: '127.0.0.1', port: 0 });
  const bare = await bareApp(databaseUrl, platform.platform_code);
  const bareUrl = await bare.app.listen({ host: '127.0.0.1', port: 0 });

  // The worker runs this same file.
  const worker = startTsxWorker(import.meta.url);
  const load = (job: LoadJob) =>
    new Promise<LoadResult>((resolve) => {
      worker.once('message', resolve);
      worker.postMessage(job);
    });

  const targets = {
    a: { url: bareUrl, path: `/bare/${account.zrn}` },
    b: { url: fullUrl, path: `/bench/accounts/${account.zrn}`, key },
    details: { url: fullUrl, path: `/accounts/${account.zrn}/details`, key },
  };
  const results: Record<keyof typeof targets, LoadResult[]> = { a: [], b: [], details: [] };
  process.stdout.write(
    `foundation bench: concurrency ${concurrency}, ${rounds} × ${seconds} s per target, log level ${logLevel}, ` +
      `${os.cpus().length} CPUs\n`,
  );
  const only = (process.env.BENCH_TARGETS ?? 'a,b,details').split(',');
  for (let round = 1; round <= rounds; round++) {
    for (const name of (Object.keys(targets) as Array<keyof typeof targets>).filter((n) =>
      only.includes(n),
    )) {
      // The servers' own cost, less sensitive than req/s to what else the machine runs: how long the main
      // thread's event loop was busy, per request.
      const before = performance.eventLoopUtilization();
      const result = await load({ ...targets[name], seconds, concurrency });
      const busy = performance.eventLoopUtilization(before);
      result.serverUs = (busy.active * 1000) / result.sent;
      const bad = Object.entries(result.statuses).filter(([s]) => s !== '200');
      if (bad.length) throw new Error(`${name}: non-200 answers ${JSON.stringify(result.statuses)}`);
      results[name].push(result);
      process.stdout.write(
        `  round ${round} ${name.padEnd(7)} ${result.rps.toFixed(0).padStart(6)} req/s  p99 ${result.p99.toFixed(2).padStart(6)} ms  ${result.serverUs.toFixed(0).padStart(4)} µs server time/request\n`,
      );
    }
  }

  // Medians over rounds; the ratio is taken per round (a and b measured back to back) and its median
  // reported, so load from elsewhere on a shared machine weighs on both sides of each pair alike.
  const summary = (list: LoadResult[]) => ({
    rps: median(list.map((r) => r.rps)),
    p50: median(list.map((r) => r.p50)),
    p99: median(list.map((r) => r.p99)),
    serverUs: median(list.map((r) => r.serverUs ?? NaN)),
  });
  const row = (label: string, list: LoadResult[]) => {
    if (list.length === 0) return '';
    const r = summary(list);
    return `${label.padEnd(58)} ${r.rps.toFixed(0).padStart(7)} req/s   p50 ${r.p50.toFixed(2).padStart(6)} ms   p99 ${r.p99.toFixed(2).padStart(6)} ms   ${r.serverUs.toFixed(0).padStart(4)} µs/req\n`;
  };
  const ratio = (list: LoadResult[]) => median(list.map((r, i) => r.rps / results.a[i]!.rps));
  process.stdout.write(`\nmedians over ${rounds} rounds:\n`);
  process.stdout.write(row('(a) bare Fastify + one SELECT', results.a));
  process.stdout.write(row('(b) full stack + the same SELECT (GET /bench/accounts/{zrn})', results.b));
  process.stdout.write(row('    GET /accounts/{zrn}/details (product route, 2+ reads)', results.details));
  if (results.a.length && results.b.length) {
    const details = results.details.length ? `   details/a = ${ratio(results.details).toFixed(2)}` : '';
    process.stdout.write(`\nb/a = ${ratio(results.b).toFixed(2)} (goal ≥ 0.6)${details}\n`);
    const cost = median(results.b.map((r, i) => r.serverUs! / results.a[i]!.serverUs!));
    process.stdout.write(
      `server time per request, b/a = ${cost.toFixed(2)} (a: ${summary(results.a).serverUs.toFixed(0)} µs, b: ${summary(results.b).serverUs.toFixed(0)} µs)\n`,
    );
  }

  await worker.terminate();
  await full.close();
  await bare.app.close();
  await bare.pool.end();
  await runtime.close();
  await admin.query(`drop database if exists ${dbName} with (force)`);
  await admin.end();
  await stopEmbedded?.();
  rmSync(dataDir, { recursive: true, force: true });
}

if (isMainThread) {
  main().then(
    () => process.exit(0),
    (error: unknown) => {
      console.error(error);
      process.exit(1);
    },
  );
}
