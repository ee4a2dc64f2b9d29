import { spawn } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { startEmbeddedPostgres } from '../src/store/embedded-postgres.ts';

/**
 * `npm test`: runs every test file with node's test runner. Without DATABASE_URL it first starts an
 * embedded PostgreSQL (the same zero-setup path as `npm start`), so the suite runs on a fresh machine.
 * Without REDIS_URL the Redis-backed tests skip and say why.
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

async function main(): Promise<number> {
  const args = process.argv.slice(2);
  const files = testFiles(args.length ? args : ['test']);
  const env = { ...process.env };
  let stopDatabase: (() => Promise<void>) | null = null;
  if (!env.DATABASE_URL) {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'svc-test-pg-'));
    const embedded = await startEmbeddedPostgres(dir);
    env.DATABASE_URL = embedded.url;
    stopDatabase = async () => {
      await embedded.stop();
      rmSync(dir, { recursive: true, force: true });
    };
    process.stdout.write(`DATABASE_URL not set: using an embedded PostgreSQL for the tests\n`);
  }
  if (!env.REDIS_URL) process.stdout.write('REDIS_URL not set: Redis-backed tests will be skipped\n');
  const concurrency = env.SVC_TEST_CONCURRENCY ?? '2';
  // A hang must fail the run, not use up CI's time: --test-force-exit ends a file whose tests are done
  // but whose handles are still open (a leaked connection once kept a file, and CI, waiting for good),
  // and --test-timeout bounds each test and, on Node 20, each file as a whole.
  const timeoutMs = env.SVC_TEST_TIMEOUT_MS ?? '600000';
  const child = spawn(
    process.execPath,
    [
      '--import',
      'tsx',
      '--test',
      `--test-concurrency=${concurrency}`,
      '--test-force-exit',
      `--test-timeout=${timeoutMs}`,
      ...files,
    ],
    {
      env,
      stdio: 'inherit',
    },
  );
  const code = await new Promise<number>((resolve) =>
    child.on('exit', (c, signal) => resolve(c ?? (signal ? 1 : 0))),
  );
  await stopDatabase?.();
  return code;
}

main().then(
  (code) => process.exit(code),
  (error: unknown) => {
    console.error(error);
    process.exit(1);
  },
);
