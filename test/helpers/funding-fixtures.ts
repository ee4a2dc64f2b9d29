import assert from 'node:assert/strict';
import type { FundEvent, FundQuote } from '../../src/contract/funding.schemas.ts';
import type { SvcClient } from '../../src/sdk/client.ts';
import type { TestService } from './test-service.ts';

/** Shared set-up of the funding tests (issue 6): prices, participants with accounts, quotes and deposits. */
export const TEST_PRICES = {
  'BTC/USD': '65000.25',
  'ETH/USD': '3200.5',
  'USDC/USD': '1',
  'USDT/USD': '1.0001',
  'SOL/USD': '150.125',
};

export async function setPrices(svc: TestService): Promise<void> {
  await svc.admin.post('/prices', { pairs: TEST_PRICES });
}

/** An approved customer of the platform with a customer account labelled `label`. */
export async function newAccountHolder(svc: TestService, platformCode: string, label = 'general') {
  const participant = await svc.newParticipant(platformCode);
  const account = await svc.newCustomerAccount(platformCode, participant.participant_code, label);
  return { code: participant.participant_code, zrn: account.zrn };
}

export async function fundQuote(
  client: SvcClient,
  body: { participant_code: string; fund_asset: string; account_label?: string; client_fund_id?: string },
): Promise<FundQuote> {
  const res = await client.send<{ message: FundQuote }>('POST', '/fund/rfq', { body });
  assert.equal(res.status, 200, `POST /fund/rfq: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.message;
}

export async function clientToken(
  client: SvcClient,
  body: {
    participant_code: string;
    permissions?: string[];
    reference_id?: string;
    deposit_details?: { account_label: string };
  },
): Promise<{ token: string; deposit_intent_id?: string }> {
  const res = await client.send<{ message: { token: string; deposit_intent_id?: string } }>(
    'POST',
    '/client_auth_token',
    { body: { permissions: ['fwc'], ...body } },
  );
  assert.equal(res.status, 201, `POST /client_auth_token: ${res.status} ${JSON.stringify(res.body)}`);
  return res.body.message;
}

export interface DepositInput {
  deposit_address: string;
  quantity: string;
  transaction_id?: string;
  source_address?: string;
  fund_asset?: string;
  deposit_timestamp?: number;
  success?: boolean;
  reason?: string;
}

export function recordDeposit(svc: TestService, body: DepositInput): Promise<FundEvent> {
  return svc.admin.post<FundEvent>('/deposits', body);
}

/** POST /admin/deposits answered as is (status and body), for refusals. */
export async function postDeposit(svc: TestService, body: unknown) {
  const response = await svc.operatorCall('POST', '/deposits', body);
  return { status: response.status, body: response.json as Record<string, unknown> };
}

export async function notificationsOf(svc: TestService, platformCode: string, payloadType: string) {
  const rows = await svc.runtime.store.db
    .selectFrom('webhook_notifications')
    .select(['notification_id', 'resource_key', 'payload', 'seq'])
    .where('platform_code', '=', platformCode)
    .where('payload_type', '=', payloadType)
    .orderBy('seq')
    .execute();
  return rows.map((r) => ({ ...r, payload: r.payload as Record<string, unknown> }));
}

export async function usdBalance(svc: TestService, participantCode: string, label = 'general') {
  const row = await svc.runtime.store.db
    .selectFrom('balance_accounts')
    .select('balance')
    .where('participant_code', '=', participantCode)
    .where('account_label', '=', label)
    .where('account_type', '=', 'available')
    .where('asset', '=', 'USD')
    .executeTakeFirst();
  return row?.balance;
}

/** Polls with a bounded deadline (no fixed sleeps): resolves with the first truthy value of `probe`. */
export async function eventually<T>(
  probe: () => Promise<T | undefined | null | false>,
  what: string,
  deadlineMs = 15_000,
): Promise<T> {
  const until = Date.now() + deadlineMs;
  for (;;) {
    const value = await probe();
    if (value) return value;
    if (Date.now() > until) assert.fail(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 50));
  }
}

let txCounter = 0;
export function txId(): string {
  return `0x${(++txCounter).toString(16).padStart(8, '0')}${Date.now().toString(16)}${Math.random().toString(16).slice(2, 10)}`;
}
