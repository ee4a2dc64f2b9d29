import assert from 'node:assert/strict';
import { setTimeout as sleep } from 'node:timers/promises';
import type {
  ConvertWithdrawExecution,
  ConvertWithdrawQuote,
  LiquidityExecution,
  LiquidityQuote,
} from '../../src/contract/quotes.schemas.ts';
import type { Trade } from '../../src/contract/trades.schemas.ts';
import type { SvcClient } from '../../src/sdk/client.ts';
import type { TestService } from './test-service.ts';

/** Shared set-up of the quote, trade and settlement tests (issue 7). */
export async function setPrices(svc: TestService, pairs: Record<string, string>): Promise<void> {
  await svc.admin.post('/prices', { pairs });
}

/** Credits (or debits) an available balance through the operator API (a real ledger movement). */
export async function fund(
  svc: TestService,
  participantCode: string,
  asset: string,
  amount: string,
  accountLabel = 'general',
): Promise<void> {
  await svc.admin.post('/balances', {
    participant_code: participantCode,
    account_label: accountLabel,
    asset,
    amount,
  });
}

/** The available balance, read straight from the ledger ("0" when there is no row yet). */
export async function balanceOf(
  svc: TestService,
  participantCode: string,
  asset: string,
  accountLabel = 'general',
): Promise<string> {
  const row = await svc.runtime.store.db
    .selectFrom('balance_accounts')
    .select('balance')
    .where('participant_code', '=', participantCode)
    .where('account_label', '=', accountLabel)
    .where('account_type', '=', 'available')
    .where('asset', '=', asset)
    .executeTakeFirst();
  return row ? String(row.balance) : '0';
}

export async function liquidityQuote(
  client: SvcClient,
  body: Record<string, unknown>,
): Promise<LiquidityQuote> {
  const res = await client.send<{ message: LiquidityQuote }>('POST', '/liquidity/rfq', { body });
  assert.equal(res.status, 201, `POST /liquidity/rfq: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.message;
}

export async function convertWithdrawQuote(
  client: SvcClient,
  body: Record<string, unknown>,
): Promise<ConvertWithdrawQuote> {
  const res = await client.send<{ message: ConvertWithdrawQuote }>('POST', '/convert_withdraw/rfq', { body });
  assert.equal(res.status, 201, `POST /convert_withdraw/rfq: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.message;
}

export async function executeLiquidity(client: SvcClient, quoteId: string): Promise<LiquidityExecution> {
  const res = await client.send<{ message: LiquidityExecution }>('POST', '/liquidity/execute', {
    body: { quote_id: quoteId },
  });
  assert.equal(res.status, 200, `POST /liquidity/execute: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.message;
}

export async function executeConvertWithdraw(
  client: SvcClient,
  quoteId: string,
): Promise<ConvertWithdrawExecution> {
  const res = await client.send<{ message: ConvertWithdrawExecution }>('POST', '/convert_withdraw/execute', {
    body: { quote_id: quoteId },
  });
  assert.equal(res.status, 200, `POST /convert_withdraw/execute: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.message;
}

export async function getTrade(client: SvcClient, tradeId: string): Promise<Trade> {
  const res = await client.send<{ message: Trade }>('GET', `/trades/${tradeId}`);
  assert.equal(res.status, 200, `GET /trades/${tradeId}: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.message;
}

export async function tradesByClientTradeId(client: SvcClient, clientTradeId: string): Promise<Trade[]> {
  const res = await client.send<{ message: Trade[] }>('GET', '/trades', {
    query: { client_trade_id: clientTradeId },
  });
  assert.equal(res.status, 200, `GET /trades: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.message;
}

/** The outbox rows of one resource, oldest first. */
export async function notificationsOf(
  svc: TestService,
  resourceKey: string,
): Promise<Array<{ payload_type: string; payload: Record<string, unknown> }>> {
  const rows = await svc.runtime.store.db
    .selectFrom('webhook_notifications')
    .select(['payload_type', 'payload'])
    .where('resource_key', '=', resourceKey)
    .orderBy('seq')
    .execute();
  return rows.map((r) => ({ payload_type: r.payload_type, payload: r.payload as Record<string, unknown> }));
}

/** Polls until `check` returns a value (not undefined), or fails after `timeoutMs`. */
export async function eventually<T>(
  what: string,
  check: () => Promise<T | undefined>,
  timeoutMs = 15_000,
): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) assert.fail(`timed out waiting for ${what}`);
    await sleep(50);
  }
}
