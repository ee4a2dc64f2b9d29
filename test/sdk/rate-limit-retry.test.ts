import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { createClient, RATE_LIMIT_WAIT_MS, SvcRateLimitError, type RetryOptions } from 'svc-platform/sdk';
import type { RateLimitState } from '../../src/contract/rate-limits.schemas.ts';
import { startTestService, type TestService } from '../helpers/test-service.ts';
import { fund, setPrices } from '../helpers/trades-fixtures.ts';

/**
 * Issue 9 point 2 (429 row) against the real server: a limit of 3 requests per window, so the fourth is
 * refused with 429 and `Retry-After`. The SDK waits 10 s, or `Retry-After` when longer (spec 7, part 8;
 * wire-contract §2.3), then resends. Nothing really waits: the injected sleep records the wait and, in
 * place of time passing, lifts the block with the operator's `DELETE /admin/rate_limits/{ip}`.
 */
const IP = '127.0.0.1';
type Key = { api_key: string; api_secret: string; passphrase: string };
/** A service with the limit, and a key of a platform on it. */
type Setup = { svc: TestService; key: Key };
const started: TestService[] = [];

async function startWithBlock(blockMs: number): Promise<TestService> {
  const service = await startTestService({
    env: { SVC_RATE_LIMIT: '3', SVC_RATE_LIMIT_BLOCK_MS: String(blockMs) },
  });
  started.push(service);
  return service;
}

/** Each group of tests below starts its own service in a before(), so that each test also runs alone. */
async function setUp(blockMs: number): Promise<Setup> {
  const svc = await startWithBlock(blockMs);
  const { key } = await svc.newPlatform();
  return { svc, key };
}

/** A client whose sleep records each wait and then lifts the block (when `lift`), as time passing would. */
function client({ svc, key }: Setup, options: { lift: boolean; retry?: RetryOptions }) {
  const slept: number[] = [];
  const statuses: number[] = [];
  const sdk = createClient({
    baseUrl: svc.url,
    apiKey: key.api_key,
    apiSecret: key.api_secret,
    passphrase: key.passphrase,
    retry: {
      sleep: async (ms) => {
        slept.push(ms);
        if (options.lift) await svc.admin.delete(`/rate_limits/${IP}`);
      },
      ...options.retry,
    },
    fetch: async (input, init) => {
      const response = await fetch(input, init);
      statuses.push(response.status);
      return response;
    },
  });
  return { sdk, slept, statuses };
}

async function useUpTheWindow(svc: TestService, sdk: ReturnType<typeof client>['sdk']): Promise<void> {
  await svc.admin.delete(`/rate_limits/${IP}`);
  for (let i = 0; i < 3; i++) await sdk.time();
}

after(async () => {
  for (const service of started) await service.close().catch(() => {});
});

describe('block 30 s', () => {
  let setup: Setup;
  before(async () => {
    setup = await setUp(30_000);
  });

  test('Retry-After longer than 10 s (block 30 s): the SDK waits Retry-After, then the GET succeeds', async () => {
    const { sdk, slept, statuses } = client(setup, { lift: true });
    await useUpTheWindow(setup.svc, sdk);
    const trades = await sdk.trades.list();
    assert.deepEqual(trades, []);
    assert.deepEqual(statuses, [200, 200, 200, 429, 200]);
    assert.equal(slept.length, 1);
    // Retry-After is whole seconds left of the block: 30, or 29 if a second boundary passed meanwhile.
    assert.ok(slept[0]! >= 29_000 && slept[0]! <= 30_000, `waited ${slept[0]} ms`);
  });

  test('a Retry-After past the overall deadline is not waited for: SvcRateLimitError at once', async () => {
    const { sdk, slept, statuses } = client(setup, { lift: true, retry: { deadlineMs: 20_000 } });
    await useUpTheWindow(setup.svc, sdk);
    await assert.rejects(sdk.trades.list(), SvcRateLimitError);
    assert.deepEqual(statuses, [200, 200, 200, 429]);
    assert.deepEqual(slept, []);
  });
});

describe('block 2 s', () => {
  let setup: Setup;
  before(async () => {
    setup = await setUp(2_000);
  });

  test('Retry-After shorter than 10 s (block 2 s): the SDK still waits 10 s', async () => {
    const { sdk, slept, statuses } = client(setup, { lift: true });
    await useUpTheWindow(setup.svc, sdk);
    assert.equal((await sdk.time()).epoch_units, 'milliseconds');
    assert.deepEqual(statuses, [200, 200, 200, 429, 200]);
    assert.deepEqual(slept, [RATE_LIMIT_WAIT_MS]);
  });

  test('a refused POST did nothing (the limit comes before authentication), so it is resent: one trade', async () => {
    const { svc } = setup;
    // A platform of its own, funded here, so that its trades are only this test's.
    const {
      key,
      platform: { platform_code: platformCode },
    } = await svc.newPlatform();
    await setPrices(svc, { 'BTC/USD': '20000' });
    await fund(svc, platformCode, 'USD', '1000');
    const { sdk, slept, statuses } = client({ svc, key }, { lift: true });
    await svc.admin.delete(`/rate_limits/${IP}`);
    const quote = await sdk.quotes.requestLiquidityQuote({
      side: 'buy',
      underlying: 'BTC',
      quoted_currency: 'USD',
      quantity: '0.01',
    });
    await sdk.time();
    await sdk.time();
    const result = await sdk.quotes.executeLiquidityQuote(quote.quote_id);
    assert.equal(result.outcome, 'executed');
    assert.deepEqual(statuses, [201, 200, 200, 429, 200]);
    assert.deepEqual(slept, [RATE_LIMIT_WAIT_MS]);
    const trades = await svc.runtime.store.db
      .selectFrom('trades')
      .select('trade_id')
      .where('quote_id', '=', quote.quote_id)
      .execute();
    assert.deepEqual(
      trades.map((t) => t.trade_id),
      [result.trade_id],
    );
  });

  test('still blocked when the retry budget runs out: SvcRateLimitError with the status and request id', async () => {
    const { sdk, slept, statuses } = client(setup, { lift: false, retry: { maxRetries: 2 } });
    await useUpTheWindow(setup.svc, sdk);
    await assert.rejects(sdk.trades.list(), (error: unknown) => {
      assert.ok(error instanceof SvcRateLimitError);
      assert.equal(error.status, 429);
      assert.deepEqual(error.body, { error: 'Too Many Requests' });
      assert.match(error.requestId ?? '', /^[0-9a-f-]{36}$/);
      return true;
    });
    assert.deepEqual(statuses, [200, 200, 200, 429, 429, 429]);
    assert.deepEqual(slept, [RATE_LIMIT_WAIT_MS, RATE_LIMIT_WAIT_MS]);
    const state = await setup.svc.admin.get<RateLimitState>(`/rate_limits/${IP}`);
    assert.equal(state.blocked, true);
  });
});
