import { spawn, type ChildProcess } from 'node:child_process';
import { chmodSync, mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { Redis } from 'ioredis';
import { startEmbeddedPostgres } from '../src/store/embedded-postgres.ts';

/**
 * `npm test`: runs every test file with node's test runner. Without DATABASE_URL it first starts an
 * embedded PostgreSQL (the same zero-setup path as `npm start`), so the suite runs on a fresh machine.
 * Without REDIS_URL the Redis-backed tests skip and say why; with one that does not answer, the run stops at
 * once and says so.
 * Arguments narrow the run: `npm test -- test/http` runs the files under test/http. SVC_TEST_CONCURRENCY
 * (2) sets how many files run at once, SVC_TEST_TIMEOUT_MS (600000) how long one file may take.
 */
function testFiles(roots: string[]): string[] {
  const files: string[] = [];
  const walk = (dir: string) => {
    for (const entry of readdirSync(dir, { withFileTypes: true })) {
      const full = path.join(dir, entry.name);
      if (entry.isDirectory()) walk(full);
      else if (entry.name.endsWith('.test.ts')) files.push(full);
    }
  };
  for (const root of roots) {
    if (root.endsWith('.test.ts')) files.push(root);
    else walk(root);
  }
  return files.sort();
}

/** Why the Redis at `url` cannot be used (no answer to PING within 2 s), or null when it answers. */
async function redisProblem(url: string): Promise<string | null> {
  const redis = new Redis(url, {
    lazyConnect: true,
    connectTimeout: 2_000,
    commandTimeout: 2_000,
    maxRetriesPerRequest: 0,
    retryStrategy: () => null,
  });
  // The connection's own error (ECONNREFUSED, …) says more than the command's "Connection is closed".
  let connectionError: Error | null = null;
  redis.on('error', (error: Error) => (connectionError ??= error));
  try {
    await redis.connect();
    await redis.ping();
    return null;
  } catch (error) {
    return (connectionError ?? (error as Error)).message.replace(/\.$/, '');
  } finally {
    redis.disconnect();
  }
}

async function main(): Promise<number> {
  const args = process.argv.slice(2);
  const files = testFiles(args.length ? args : ['test']);
  const env = { ...process.env };
  // The files' temporary directories (service data dirs, worker processes' dirs, CLI homes: about 40 a run)
  // go in one directory of this run, removed at its end, rather than staying behind in /tmp (review).
  const runTmp = mkdtempSync(path.join(os.tmpdir(), 'svc-test-run-'));
  // As open as /tmp itself: as root, an embedded PostgreSQL runs as user postgres, which must reach the data
  // dirs made in it (a 0700 run dir failed every embedded start).
  chmodSync(runTmp, 0o1777);
  env.TMPDIR = runTmp;
  const removeRunTmp = () => rmSync(runTmp, { recursive: true, force: true });
  // Ctrl-C, or a supervisor's SIGTERM: the test run is passed the signal and the embedded cluster and its
  // directory are still removed (an interrupted run left a 39 MB /tmp/svc-test-pg-* each time: review).
  let interrupted: NodeJS.Signals | null = null;
  let child: ChildProcess | null = null;
  for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) {
    process.on(signal, () => {
      interrupted ??= signal;
      child?.kill(signal);
    });
  }
  const exitCode = () => 128 + os.constants.signals[interrupted!];
  let stopDatabase: (() => Promise<void>) | null = null;
  if (!env.DATABASE_URL) {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'svc-test-pg-'));
    const removeDir = () => rmSync(dir, { recursive: true, force: true });
    const embedded = await startEmbeddedPostgres(dir).catch((error: unknown) => {
      removeDir();
      removeRunTmp();
      throw error;
    });
    env.DATABASE_URL = embedded.url;
    stopDatabase = async () => {
      // A Ctrl-C reached the cluster too (it is in our process group): it may be stopping already.
      await embedded.stop().catch(() => {});
      removeDir();
    };
    process.stdout.write(`DATABASE_URL not set: using an embedded PostgreSQL for the tests\n`);
  }
  if (interrupted) {
    await stopDatabase?.();
    removeRunTmp();
    return exitCode();
  }
  if (!env.REDIS_URL) process.stdout.write('REDIS_URL not set: Redis-backed tests will be skipped\n');
  else {
    // Set but not answering, the Redis-backed files failed one by one on reconnecting clients and hung
    // until the file timeout (10 minutes each) without a word about Redis: say it once, at once.
    const problem = await redisProblem(env.REDIS_URL);
    if (problem) {
      process.stderr.write(
        `REDIS_URL is set (${env.REDIS_URL}) but Redis does not answer: ${problem}. Start it, or unset REDIS_URL to skip the Redis-backed tests.\n`,
      );
      await stopDatabase?.();
      removeRunTmp();
      return 1;
    }
  }
  const concurrency = env.SVC_TEST_CONCURRENCY ?? '2';
  // A hang must fail the run, not use up CI's time: --test-timeout bounds each test and, on Node 20, each
  // file as a whole, so a file left waiting on a leaked connection fails after it. Not --test-force-exit,
  // which also ended such files early: with files run side by side it drops verdicts of tests that ran,
  // failures included, and the run still passes (nodejs/node#64833; here a run reported 931 of 938 tests,
  // and test/unit/retry-policy.test.ts alone lost up to 14 of its 131 in 3 runs of 8).
  // Every file ends on its own today (938 of 938 in 5.5 minutes without the flag).
  const timeoutMs = env.SVC_TEST_TIMEOUT_MS ?? '600000';
  child = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      // `svc-platform/sdk` is the SDK's source in the tests (package.json `exports`), not its build in dist/,
      // which may be out of date; test/e2e/built-package.test.ts builds and tests that.
      '--conditions=svc-platform-source',
      '--test',
      `--test-concurrency=${concurrency}`,
      `--test-timeout=${timeoutMs}`,
      ...files,
    ],
    {
      env,
      stdio: 'inherit',
    },
  );
  const running = child;
  const code = await new Promise<number>((resolve) =>
    running.on('exit', (c, signal) => resolve(c ?? (signal ? 1 : 0))),
  );
  await stopDatabase?.();
  removeRunTmp();
  return interrupted ? exitCode() : code;
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
