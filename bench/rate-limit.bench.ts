/**
 * Rate-limit throughput and p99 (issue 3 "Speed"): a trivial Fastify route with
 *   (a) no limiter, (b) our memory limiter, (c) our Redis limiter,
 *   (d) @fastify/rate-limit in memory, (e) @fastify/rate-limit on Redis,
 * both limiters at 2,000 per 10 s, plus (a') a hook that only reads request.ip, to tell the cost of
 * deciding from the cost every per-IP hook pays. Printed as req/s, p99 and the ratio to (a) measured
 * in the same run.
 *
 *   REDIS_URL=redis://127.0.0.1:6379 node --import tsx bench/rate-limit.bench.ts
 *   (BENCH_ROUNDS=n for more rounds; BENCH_ONLY="memory limiter (ours)" measures one target and the bare route)
 *
 * Fairness: every server trusts X-Forwarded-For and the load comes from 4,096 client IPs in turn, so
 * each IP stays far below 2,000 per 10 s and the bench measures the accept path of every limiter, not
 * 429s (the count of non-200 answers is printed and should be 0). The servers run on the main thread,
 * the load generator (undici, fixed concurrency) on a worker thread, so they do not share an event
 * loop. Targets are measured in short interleaved rounds, each target between two runs of the bare
 * route, and the ratios are medians over rounds of the target against the mean of those two runs.
 * Besides req/s and p99 it prints the CPU time spent per request by the servers' thread, by
 * redis-server (its own INFO cpu, so Redis may be remote) and by the rest of this process (the load
 * generator): on a shared machine req/s moves with everyone else's load, CPU per request much less;
 * and on a small machine redis-server competes with the server for the same cores, so its CPU per
 * request tells how much of a Redis limiter's req/s ratio is Redis's share of the machine.
 * @fastify/rate-limit counts fixed windows (up to 2× the limit across a window edge); ours is exact.
 */
import { median, procStatCpuMs, startTsxWorker } from './bench-support.ts';
import { randomUUID } from 'node:crypto';
import os from 'node:os';
import { createHistogram } from 'node:perf_hooks';
import { isMainThread, parentPort } from 'node:worker_threads';
import fastifyRateLimit from '@fastify/rate-limit';
import Fastify, { type FastifyInstance } from 'fastify';
import { Redis } from 'ioredis';
import { Pool } from 'undici';
import { createRateLimiter, RateLimiterService } from '../src/domain/ratelimit/rate-limiter.service.ts';
import { rateLimitPlugin } from '../src/http/plugins/rate-limit.plugin.ts';

const CONCURRENCY = 64;
const CLIENT_IPS = 4096;
const WARMUP_MS = 200;
const MEASURE_MS = 800;
// Each round measures every target once and the no-limiter server between them: ~90 s in all.
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 8);
/** BENCH_ONLY, e.g. "memory limiter (ours)": measure only the targets named (and the bare route). */
const ONLY = process.env.BENCH_ONLY?.split(',').map((name) => name.trim());

interface LoadJob {
  url: string;
  warmupMs: number;
  measureMs: number;
}
interface LoadResult {
  /** Including the warm-up (for CPU per request). */
  allRequests: number;
  requests: number;
  non200: number;
  errors: number;
  rps: number;
  p50Ms: number;
  p99Ms: number;
}

/** One measurement of one target, with CPU per request: the servers' thread, redis-server, the rest. */
type Run = LoadResult & { cpuUsPerRequest: number; redisUsPerRequest: number; loadUsPerRequest: number };
/** A target's run with its ratios to the no-limiter runs just before and after it. */
type Compared = Run & { rpsRatio: number; cpuRatio: number };

const clientIp = (i: number) => `10.${(i >> 16) & 255}.${(i >> 8) & 255}.${i & 255}`;

/** Worker side: drives one server at fixed concurrency; measures after the warm-up. */
async function runLoad(job: LoadJob): Promise<LoadResult> {
  const pool = new Pool(job.url, { connections: CONCURRENCY, pipelining: 1 });
  const histogram = createHistogram();
  let allRequests = 0;
  let requests = 0;
  let non200 = 0;
  let errors = 0;
  let next = 0;
  let measuring = false;
  const started = performance.now();
  const measureFrom = started + job.warmupMs;
  const stopAt = measureFrom + job.measureMs;
  const loop = async () => {
    while (performance.now() < stopAt) {
      const ip = clientIp(next++ % CLIENT_IPS);
      const t0 = process.hrtime.bigint();
      try {
        const { statusCode, body } = await pool.request({
          path: '/ping',
          method: 'GET',
          headers: { 'x-forwarded-for': ip },
        });
        await body.dump();
        allRequests++;
        if (!measuring && performance.now() >= measureFrom) measuring = true;
        if (measuring) {
          histogram.record(Number(process.hrtime.bigint() - t0) || 1);
          requests++;
          if (statusCode !== 200) non200++;
        }
      } catch {
        errors++;
      }
    }
  };
  await Promise.all(Array.from({ length: CONCURRENCY }, loop));
  await pool.close();
  return {
    allRequests,
    requests,
    non200,
    errors,
    rps: requests / (job.measureMs / 1000),
    p50Ms: histogram.percentile(50) / 1e6,
    p99Ms: histogram.percentile(99) / 1e6,
  };
}

if (!isMainThread) {
  // One load generator for the whole run: it takes jobs one at a time from the main thread.
  parentPort!.on('message', async (job: LoadJob | null) => {
    if (job === null) return parentPort!.close();
    parentPort!.postMessage(await runLoad(job));
  });
} else {
  await main();
}

/**
 * CPU ms so far of this process's main thread, which runs every server and its Redis client, and of
 * the whole process (the difference is mostly the load generator's thread). Unlike req/s they hardly
 * move when other processes compete for the machine.
 */
function processCpuMs(): { server: number; all: number } {
  return {
    server: procStatCpuMs(`/proc/self/task/${process.pid}/stat`),
    all: procStatCpuMs('/proc/self/stat'),
  };
}

/** redis-server's own CPU ms so far (INFO cpu, µs resolution); 0 without Redis. */
async function redisCpuMs(probe: Redis | undefined): Promise<number> {
  if (!probe) return 0;
  const info = await probe.info('cpu');
  const seconds = (name: string) => Number(new RegExp(`^${name}:([0-9.]+)`, 'm').exec(info)?.[1] ?? NaN);
  return (seconds('used_cpu_user') + seconds('used_cpu_sys')) * 1000;
}

function startLoadGenerator(): { load: (url: string) => Promise<LoadResult>; stop: () => Promise<number> } {
  const worker = startTsxWorker(import.meta.url);
  return {
    load: (url) =>
      new Promise((resolve, reject) => {
        const done = (result: LoadResult) => {
          worker.off('error', failed);
          resolve(result);
        };
        const failed = (error: Error) => {
          worker.off('message', done);
          reject(error);
        };
        worker.once('message', done).once('error', failed);
        worker.postMessage({ url, warmupMs: WARMUP_MS, measureMs: MEASURE_MS } satisfies LoadJob);
      }),
    stop: () => {
      worker.postMessage(null);
      return worker.terminate();
    },
  };
}

async function server(
  setup: (app: FastifyInstance) => Promise<void>,
): Promise<{ app: FastifyInstance; url: string }> {
  const app = Fastify({ logger: false, trustProxy: true });
  await setup(app);
  app.get('/ping', async () => ({ message: 'pong' }));
  const url = await app.listen({ host: '127.0.0.1', port: 0 });
  return { app, url };
}

async function main(): Promise<void> {
  const redisUrl = process.env.REDIS_URL;
  const prefix = `bench:rl:${randomUUID()}:`;
  const closers: Array<() => Promise<unknown>> = [];
  const targets: Array<{ name: string; url: string }> = [];
  const add = async (name: string, setup: (app: FastifyInstance) => Promise<void>) => {
    if (ONLY && targets.length > 0 && !ONLY.includes(name)) return;
    const { app, url } = await server(setup);
    closers.push(() => app.close());
    targets.push({ name, url });
  };

  await add('no limiter', async () => {});
  // What any per-IP limiter pays before deciding anything, and what the app's firewall hook already pays
  // in front of the limiter: an onRequest hook and X-Forwarded-For resolution (request.ip).
  await add('hook reading request.ip', async (app) => {
    app.addHook('onRequest', (request, _reply, done) =>
      done(request.ip === '' ? new Error('no ip') : undefined),
    );
  });
  const memoryLimiter = new RateLimiterService();
  closers.push(() => memoryLimiter.close());
  await add('memory limiter (ours)', async (app) => {
    await app.register(rateLimitPlugin, { limiter: memoryLimiter });
  });
  await add('@fastify/rate-limit memory', async (app) => {
    await app.register(fastifyRateLimit, { max: 2000, timeWindow: 10_000 });
  });
  let redis: Redis | undefined;
  // Reads redis-server's CPU between rounds, on a connection of its own.
  const probe = redisUrl ? new Redis(redisUrl) : undefined;
  if (redisUrl) {
    const redisLimiter = await createRateLimiter({ redisUrl, keyPrefix: `${prefix}ours:` });
    closers.push(() => redisLimiter.close());
    await add('Redis limiter (ours)', async (app) => {
      await app.register(rateLimitPlugin, { limiter: redisLimiter });
    });
    redis = new Redis(redisUrl);
    const theirs = redis;
    await add('@fastify/rate-limit Redis', async (app) => {
      await app.register(fastifyRateLimit, {
        max: 2000,
        timeWindow: 10_000,
        redis: theirs,
        nameSpace: `${prefix}theirs:`,
      });
    });
  } else {
    console.log('REDIS_URL not set: the Redis limiters are not measured\n');
  }

  const loadAverage = () =>
    os
      .loadavg()
      .map((x) => x.toFixed(2))
      .join(' ');
  console.log(
    `${targets.length} servers, ${CONCURRENCY} connections, ${CLIENT_IPS} client IPs, ` +
      `${ROUNDS} interleaved rounds × (${WARMUP_MS} ms warm-up + ${MEASURE_MS} ms) per server; ` +
      `${os.availableParallelism()} CPUs, load average ${loadAverage()} before\n`,
  );
  const generator = startLoadGenerator();
  const measure = async (target: { url: string }): Promise<Run> => {
    const before = processCpuMs();
    const redisBefore = await redisCpuMs(probe);
    const result = await generator.load(target.url);
    const after = processCpuMs();
    const redisAfter = await redisCpuMs(probe);
    const perRequest = (ms: number) => (ms * 1000) / result.allRequests;
    return {
      ...result,
      cpuUsPerRequest: perRequest(after.server - before.server),
      redisUsPerRequest: perRequest(redisAfter - redisBefore),
      loadUsPerRequest: perRequest(after.all - before.all - (after.server - before.server)),
    };
  };
  // Shared machines drift within seconds (other processes start and stop): each target is measured
  // between two no-limiter runs and compared with their mean, B T1 B T2 B … Tn B, and each round
  // starts at another target, so no target always runs first or after the same one.
  const [baselineTarget, ...others] = targets;
  const baselineRuns: Run[] = [];
  const results = new Map<string, Compared[]>(others.map((t) => [t.name, []]));
  for (let round = 0; round < ROUNDS; round++) {
    let previous = await measure(baselineTarget!);
    baselineRuns.push(previous);
    for (let k = 0; k < others.length; k++) {
      const target = others[(round + k) % others.length]!;
      const run = await measure(target);
      const next = await measure(baselineTarget!);
      baselineRuns.push(next);
      results.get(target.name)!.push({
        ...run,
        rpsRatio: run.rps / ((previous.rps + next.rps) / 2),
        cpuRatio: (previous.cpuUsPerRequest + next.cpuUsPerRequest) / 2 / run.cpuUsPerRequest,
      });
      previous = next;
    }
  }
  await generator.stop();

  // Medians over rounds, of the ratios and of each figure separately.
  const row = (name: string, runs: Run[], ratios: [number, number]) => {
    /** One column: the median over rounds of `pick`, to `digits` places, right-aligned in `width`. */
    const cell = (pick: (r: Run) => number, digits: number, width: number) =>
      median(runs.map(pick)).toFixed(digits).padStart(width);
    const count = (pick: (r: Run) => number) => runs.reduce((n, r) => n + pick(r), 0);
    return [
      name.padEnd(28),
      cell((r) => r.rps, 0, 8),
      cell((r) => r.p99Ms, 2, 8),
      ratios[0].toFixed(3).padStart(7),
      ' ' + cell((r) => r.cpuUsPerRequest, 1, 17),
      ratios[1].toFixed(3).padStart(7),
      ' ' + cell((r) => r.redisUsPerRequest, 1, 12),
      cell((r) => r.loadUsPerRequest, 1, 15),
      ` ${count((r) => r.non200)} ${count((r) => r.errors)}`,
    ].join(' ');
  };
  console.log(
    `${'target'.padEnd(28)} ${'req/s'.padStart(8)} ${'p99 ms'.padStart(8)} ${'ratio'.padStart(7)}` +
      `  ${'server CPU µs/req'.padStart(17)} ${'ratio'.padStart(7)}  ${'redis µs/req'.padStart(12)}` +
      ` ${'load gen µs/req'.padStart(15)}  non-200 errors`,
  );
  console.log(row(baselineTarget!.name, baselineRuns, [1, 1]));
  for (const [name, runs] of results) {
    console.log(row(name, runs, [median(runs.map((r) => r.rpsRatio)), median(runs.map((r) => r.cpuRatio))]));
  }
  const ours = results.get('Redis limiter (ours)');
  const theirs = results.get('@fastify/rate-limit Redis');
  if (ours && theirs) {
    // Each against its own neighbouring no-limiter runs, so the two need not have run side by side.
    const vs = median(ours.map((r, i) => r.rpsRatio / theirs[i]!.rpsRatio));
    const vsCpu = median(ours.map((r, i) => r.cpuRatio / theirs[i]!.cpuRatio));
    console.log(
      `\nRedis limiter (ours) vs @fastify/rate-limit Redis: ${vs.toFixed(3)} by req/s, ` +
        `${vsCpu.toFixed(3)} by server CPU per request (medians of per-round ratios)`,
    );
    // On a machine where all three run, req/s follows their summed CPU per request; Redis's part of it
    // is what a remote Redis would take off this machine.
    const machine = (runs: Run[]) =>
      median(runs.map((r) => r.cpuUsPerRequest + r.redisUsPerRequest + r.loadUsPerRequest));
    const share = (name: string, runs: Run[]) => {
      const total = machine(runs);
      const redisPart = median(runs.map((r) => r.redisUsPerRequest));
      return `${name} ${redisPart.toFixed(1)} of ${total.toFixed(1)} µs (${((100 * redisPart) / total).toFixed(0)}%)`;
    };
    console.log(
      `CPU per request on this machine (server + redis-server + load generator): no limiter ` +
        `${machine(baselineRuns).toFixed(1)} µs; redis-server's part: ${share('Redis limiter (ours)', ours)}, ` +
        `${share('@fastify/rate-limit Redis', theirs)}`,
    );
  }
  console.log(
    'ratios: median over rounds of (target / no limiter) for req/s, (no limiter / target) for CPU per ' +
      'request, no limiter being the mean of the runs just before and after the target',
  );
  console.log(
    'redis µs/req: redis-server CPU per request (INFO cpu; everything Redis did meanwhile); ' +
      'load gen µs/req: the rest of this process, mostly the load generator',
  );
  console.log('goals: memory ≥ 0.95 of no limiter; Redis ≥ 0.80, and ≥ @fastify/rate-limit Redis');
  console.log(`load average ${loadAverage()} after`);

  for (const close of closers.reverse()) await close();
  await probe?.quit();
  if (redis) {
    const keys = await redis.keys(`${prefix}*`);
    for (let i = 0; i < keys.length; i += 1000) await redis.del(...keys.slice(i, i + 1000));
    await redis.quit();
  }
}
