import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import {
  appendFileSync,
  cpSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { promisify } from 'node:util';
import { webhookDeliveryHeaders } from '../../src/contract/webhook-signature.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { MODULE_TRACE, modulesInTrace } from '../helpers/module-trace-file.ts';
import { PROJECT_ROOT, startCli } from '../helpers/service-process.ts';
import { startTestService, type PlatformFixture, type TestService } from '../helpers/test-service.ts';

/**
 * The package as it is installed: a copy of this project's package files in a directory of its own, built there by
 * its own build script (`npm run build`, which `npm ci` and `npm install` run as `prepare`). The other tests run
 * the source (and the SDK's, through the `svc-platform-source` condition); this file checks what the build gives:
 * - another project imports the SDK with plain Node, and TypeScript checks code against its declarations;
 * - the package npm makes holds the build, and no tests;
 * - bin/svc.mjs (`npx svc`, `npm start`) runs the server from the build with plain Node, and the source through
 *   tsx once the source differs from what was built.
 * A copy rather than this project's dist/: other test files run bin/svc.mjs meanwhile, and a build here would
 * replace their dist/ under them. The consumer is a project of its own, with the package in its node_modules (a
 * link, as `npm install <path>` makes).
 */
const run = promisify(execFile);
/** What the package holds of this project (package.json `files`), and what builds it. */
const PACKAGE_FILES = [
  'package.json',
  'bin',
  'src',
  'scripts/build.mjs',
  'tsconfig.json',
  'tsconfig.build.json',
];
let svc: TestService;
let fixture: PlatformFixture;
let pkg: string;
let consumer: string;
let database: TestDatabase | undefined;

before(async () => {
  pkg = mkdtempSync(path.join(os.tmpdir(), 'svc-package-'));
  for (const file of PACKAGE_FILES)
    cpSync(path.join(PROJECT_ROOT, file), path.join(pkg, file), { recursive: true });
  symlinkSync(path.join(PROJECT_ROOT, 'node_modules'), path.join(pkg, 'node_modules'));
  // A package directory has tests and benches beside what it ships (the pack test checks they stay out).
  for (const dir of ['test', 'bench']) {
    mkdirSync(path.join(pkg, dir));
    writeFileSync(path.join(pkg, dir, `example.${dir}.ts`), 'export {};\n');
  }
  await run(process.execPath, ['scripts/build.mjs'], { cwd: pkg });
  // Built beside dist/ and renamed to it (a process starting meanwhile loads a whole build): nothing left over.
  assert.deepEqual(
    readdirSync(pkg).filter((name) => name.startsWith('dist')),
    ['dist'],
  );
  svc = await startTestService();
  fixture = await svc.newPlatform();
  consumer = mkdtempSync(path.join(os.tmpdir(), 'svc-sdk-consumer-'));
  mkdirSync(path.join(consumer, 'node_modules', '@types'), { recursive: true });
  symlinkSync(pkg, path.join(consumer, 'node_modules', 'svc-platform'));
  symlinkSync(
    path.join(PROJECT_ROOT, 'node_modules', '@types', 'node'),
    path.join(consumer, 'node_modules', '@types', 'node'),
  );
  writeFileSync(path.join(consumer, 'package.json'), JSON.stringify({ type: 'module', private: true }));
});
after(async () => {
  await svc?.close();
  await database?.drop();
  for (const dir of [consumer, pkg]) if (dir) rmSync(dir, { recursive: true, force: true });
});

test('plain Node, without tsx: the SDK signs calls the server accepts and verifies its webhook signatures', async () => {
  const rawBody = JSON.stringify({ trade_id: 't-1', trade_state: 'accepted' });
  const secret = 'consumer-webhook-secret';
  const headers = webhookDeliveryHeaders({
    payloadType: 'trade_status_changed',
    notificationId: '9b2d6f0e-8d5a-4c1e-9f3b-2a7c1d4e5f60',
    timestampMs: Date.now(),
    rawBody,
    secret,
  });
  writeFileSync(
    path.join(consumer, 'consumer.mjs'),
    `import { createClient, verifyWebhook, SvcNotFoundError } from 'svc-platform/sdk';
const input = JSON.parse(process.env.CONSUMER_INPUT);
const client = createClient(input.credentials);
const { epoch } = await client.time();
const trades = await client.trades.list();
const missing = await client.trades.get('no-such-trade').then(() => 'found', (err) => err instanceof SvcNotFoundError);
const verified = verifyWebhook(input.rawBody, input.headers, input.secret);
console.log(JSON.stringify({
  resolved: import.meta.resolve('svc-platform/sdk'), epoch, trades: trades.length, missing,
  payloadType: verified.payloadType, payload: verified.payload,
}));
`,
  );
  const input = {
    credentials: {
      baseUrl: svc.url,
      apiKey: fixture.key.api_key,
      apiSecret: fixture.key.api_secret,
      passphrase: fixture.key.passphrase,
    },
    rawBody,
    headers,
    secret,
  };
  const before = Date.now();
  const { stdout } = await run(process.execPath, ['consumer.mjs'], {
    cwd: consumer,
    // No --import tsx, none inherited: node runs the package's JavaScript as any project's would.
    env: { ...process.env, NODE_OPTIONS: '', CONSUMER_INPUT: JSON.stringify(input) },
  });
  const result = JSON.parse(stdout);
  assert.match(result.resolved, /\/dist\/sdk\/index\.js$/, 'the package export is the built JavaScript');
  assert.ok(result.epoch >= before - 5_000, `server time ${result.epoch}`);
  assert.equal(result.trades, 0, 'a signed call the server accepted: the new platform has no trades');
  assert.equal(result.missing, true, "a 404 is the SDK's SvcNotFoundError");
  assert.equal(result.payloadType, 'trade_status_changed');
  assert.deepEqual(result.payload, JSON.parse(rawBody));
});

test("TypeScript: code type-checks against the SDK's declarations, which are the contract's types, not any", async () => {
  writeFileSync(
    path.join(consumer, 'uses-sdk.ts'),
    `import { createClient, SvcError, type Trade, type TradeState } from 'svc-platform/sdk';
const client = createClient({ baseUrl: 'http://127.0.0.1:8080', apiKey: 'k', apiSecret: 's', passphrase: 'p' });
export async function tradeStates(): Promise<TradeState[]> {
  const trades: Trade[] = await client.trades.list();
  return trades.map((trade) => trade.trade_state);
}
export const isSvcError = (err: unknown): boolean => err instanceof SvcError && err.status >= 400;
`,
  );
  writeFileSync(
    path.join(consumer, 'misuses-sdk.ts'),
    `import type { Trade } from 'svc-platform/sdk';
export const state = (trade: Trade): 'settled' => trade.trade_state;
`,
  );
  // The settings of a strict NodeNext project that knows nothing of this one's (no allowImportingTsExtensions),
  // and checks the declarations it reads (no skipLibCheck).
  writeFileSync(
    path.join(consumer, 'tsconfig.json'),
    JSON.stringify({
      compilerOptions: {
        target: 'ES2022',
        module: 'NodeNext',
        moduleResolution: 'NodeNext',
        strict: true,
        noEmit: true,
        types: ['node'],
      },
      files: ['uses-sdk.ts', 'misuses-sdk.ts'],
    }),
  );
  const tsc = path.join(PROJECT_ROOT, 'node_modules', 'typescript', 'bin', 'tsc');
  const outcome = await run(process.execPath, [tsc, '-p', '.'], { cwd: consumer }).then(
    () => ({ code: 0, stdout: '' }),
    (err: { code: number; stdout: string }) => ({ code: err.code, stdout: err.stdout }),
  );
  const errors = outcome.stdout.split('\n').filter((line) => /error TS\d+/.test(line));
  // The one error is the misuse: a trade's state is one of the contract's, and 'settled' is not.
  assert.equal(errors.length, 1, `tsc's errors:\n${outcome.stdout}`);
  assert.match(errors[0]!, /^misuses-sdk\.ts\(2,\d+\): error TS2322/);
  assert.match(errors[0]!, /'settled'|"settled"/);
  assert.equal(outcome.code, 2);
});

test('the package npm makes (a git dependency, npm pack) holds the build, bin/svc.mjs and the source, no tests', async () => {
  // --ignore-scripts: the package was built above; prepare would build it again.
  const { stdout } = await run('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: pkg });
  const [pack] = JSON.parse(stdout) as [{ files: Array<{ path: string }> }];
  const files = new Set(pack.files.map((file) => file.path));
  for (const needed of [
    'dist/sdk/index.js',
    'dist/sdk/index.d.ts',
    'dist/contract/wire-values.js',
    'dist/main/cli.js',
    'dist/store/migrations/0001_foundation.sql',
    'dist/build-info.json',
    'bin/svc.mjs',
    'bin/build-state.mjs',
    'src/main/cli.ts',
    'src/store/migrations/0001_foundation.sql',
  ])
    assert.ok(files.has(needed), `the package holds ${needed}`);
  assert.ok(
    ![...files].some((file) => file.startsWith('test/') || file.startsWith('bench/')),
    'the package holds no tests or benches',
  );
});

/** The package's own files (relative to it) and the packages that `svc <args>`, run by its bin/svc.mjs, loads. */
async function runPackageBin(
  args: string[],
  env: Record<string, string>,
  whileRunning?: (proc: ReturnType<typeof startCli>) => Promise<void>,
): Promise<{ code: number | null; stdout: string; files: string[]; packages: string[] }> {
  const traceFile = path.join(pkg, `modules-${args[0]}.txt`);
  const proc = startCli(
    args,
    // No --import tsx, none inherited: node runs the package as an operator's machine would.
    { ...env, NODE_OPTIONS: '', MODULE_TRACE_FILE: traceFile },
    { entry: ['--import', MODULE_TRACE, path.join(pkg, 'bin', 'svc.mjs')] },
  );
  try {
    await whileRunning?.(proc);
  } finally {
    if (whileRunning) proc.child.kill('SIGTERM');
  }
  const { code } = await proc.exited;
  const modules = modulesInTrace(traceFile, pkg);
  rmSync(traceFile);
  return { code, stdout: proc.stdout(), ...modules };
}

test('bin/svc.mjs runs the server from the build with plain Node, and the source through tsx once it changed', async () => {
  database = await createTestDatabase();
  // The migrations beside the build (dist/store/migrations): the database's are checked against them.
  const migrate = await runPackageBin(['migrate'], { DATABASE_URL: database.url });
  assert.equal(migrate.code, 0, migrate.stdout);
  assert.ok(migrate.files.includes('dist/store/migrate.js'), `migrate loads ${migrate.files.join(', ')}`);

  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'svc-package-data-'));
  let readyz = 0;
  const serve = await runPackageBin(
    ['serve'],
    { DATABASE_URL: database.url, SVC_PORT: '0', SVC_LOG_LEVEL: 'warn', SVC_DATA_DIR: dataDir },
    async (proc) => {
      const [, url] = await proc.waitFor(/^ {2}public API +(http:\/\/\S+)$/m);
      readyz = (await fetch(`${url}/readyz`)).status;
    },
  );
  rmSync(dataDir, { recursive: true, force: true });
  assert.equal(readyz, 200, 'the server from the build is ready');
  assert.equal(serve.code, 0, 'it stops cleanly on SIGTERM');
  for (const built of ['dist/main/cli.js', 'dist/app.js', 'dist/domain/webhooks/webhook-delivery.js'])
    assert.ok(serve.files.includes(built), `svc serve loads ${built}`);
  assert.deepEqual(
    serve.files.filter((file) => file.endsWith('.ts')),
    [],
    'TypeScript source svc serve loads',
  );
  assert.ok(!serve.packages.includes('tsx'), `svc serve loads tsx: ${serve.packages.join(', ')}`);

  // Source that differs from what was built (an edit, a checkout) is run, through tsx, not shadowed by the build.
  // A file deep in the tree: the digest reads all of src/.
  appendFileSync(path.join(pkg, 'src', 'domain', 'webhooks', 'outbox.ts'), '// changed since the build\n');
  const help = await runPackageBin(['--help'], {});
  assert.equal(help.code, 0, help.stdout);
  assert.ok(help.files.includes('src/main/cli.ts'), `svc --help loads ${help.files.join(', ')}`);
  assert.ok(!help.files.some((file) => file.startsWith('dist/')), 'svc --help loads no build');
  assert.ok(help.packages.includes('tsx'));
});
