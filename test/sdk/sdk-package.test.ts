import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { promisify } from 'node:util';
import { webhookDeliveryHeaders } from '../../src/contract/webhook-signature.ts';
import { PROJECT_ROOT } from '../helpers/service-process.ts';
import { startTestService, type PlatformFixture, type TestService } from '../helpers/test-service.ts';

/**
 * The SDK as another project gets it (`package.json` `exports`, built into `dist/` by `npm run build:sdk`,
 * which `npm ci`/`npm install` run as `prepare`; the other tests import its source, through the
 * `svc-platform-source` condition): plain Node imports it without tsx, TypeScript checks code against its
 * declarations, and the package npm makes of this project holds it. The consumer is a project of its own, with
 * this package in its node_modules (a link, as `npm install <path>` makes).
 */
const run = promisify(execFile);
let svc: TestService;
let fixture: PlatformFixture;
let consumer: string;

before(async () => {
  // The build this test checks is the source's as it is now.
  await run(process.execPath, ['scripts/build-sdk.mjs'], { cwd: PROJECT_ROOT });
  svc = await startTestService();
  fixture = await svc.newPlatform();
  consumer = mkdtempSync(path.join(os.tmpdir(), 'svc-sdk-consumer-'));
  mkdirSync(path.join(consumer, 'node_modules', '@types'), { recursive: true });
  symlinkSync(PROJECT_ROOT, path.join(consumer, 'node_modules', 'svc-platform'));
  symlinkSync(
    path.join(PROJECT_ROOT, 'node_modules', '@types', 'node'),
    path.join(consumer, 'node_modules', '@types', 'node'),
  );
  writeFileSync(path.join(consumer, 'package.json'), JSON.stringify({ type: 'module', private: true }));
});
after(async () => {
  await svc?.close();
  if (consumer) rmSync(consumer, { recursive: true, force: true });
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

test('the package npm makes of this project (a git dependency, npm pack) holds the built SDK and the server', async () => {
  // --ignore-scripts: the SDK was built above; prepare would build it again.
  const { stdout } = await run('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], {
    cwd: PROJECT_ROOT,
  });
  const [pack] = JSON.parse(stdout) as [{ files: Array<{ path: string }> }];
  const files = new Set(pack.files.map((file) => file.path));
  for (const needed of [
    'dist/sdk/index.js',
    'dist/sdk/index.d.ts',
    'dist/contract/wire-values.js',
    'bin/svc.mjs',
    'src/main/cli.ts',
    'src/store/migrations/0001_foundation.sql',
  ])
    assert.ok(files.has(needed), `the package holds ${needed}`);
  assert.ok(
    ![...files].some((file) => file.startsWith('test/') || file.startsWith('bench/')),
    'the package holds no tests or benches',
  );
});
