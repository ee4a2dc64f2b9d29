import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { SvcClient } from '../../src/sdk/client.ts';
import { startTestService, type TestService } from '../helpers/test-service.ts';
import {
  balanceOf,
  eventually,
  executeLiquidity,
  fund,
  getTrade,
  liquidityQuote,
  notificationsOf,
  setPrices,
} from '../helpers/trades-fixtures.ts';
import { assertVendorSchema } from '../helpers/vendor-schema.ts';

/**
 * Issue 7 points 6, 7 and 9: the settlement worker (graphile-worker, running in this process with
 * SVC_ROLE=all) takes every trade accepted → active → terminated on its own. The delays are configured to
 * zero so nothing waits for time; the test polls with a deadline until the worker is done.
 */
let svc: TestService;
let platformCode: string;
let client: SvcClient;

/** spec 2.4, copied here on purpose: the notification omits exactly these fields of GET /trades/{id}. */
const SPEC_2_4_OMITTED = [
  'accepted_timestamp',
  'defaulted_timestamp',
  'settled_timestamp',
  'last_update',
  'settlement_timestamp',
  'expiry_timestamp',
  'spread_notional',
  'spread_bps',
  'session_id',
  'payment_processor',
  'fees',
  'batch_trade_id',
];

before(async () => {
  svc = await startTestService({
    env: {
      SVC_ROLE: 'all',
      SVC_SETTLEMENT_ACTIVE_AFTER_MS: '0',
      SVC_SETTLEMENT_TERMINATE_AFTER_MS: '0',
    },
  });
  await setPrices(svc, { 'ETH/USD': '3', 'BTC/USD': '65000' });
  const fixture = await svc.newPlatform();
  platformCode = fixture.platform.platform_code;
  client = fixture.client;
});
after(() => svc?.close());

function terminated(tradeId: string) {
  return eventually(`trade ${tradeId} terminated`, async () => {
    const trade = await getTrade(client, tradeId);
    return trade.trade_state === 'terminated' ? trade : undefined;
  });
}

test('the worker settles trades on its own, moving balances exactly (0.1 + 0.2 is 0.3)', async () => {
  const buyer = (await svc.newParticipant(platformCode)).participant_code;
  await fund(svc, buyer, 'USD', '0.9');
  const first = await liquidityQuote(client, {
    side: 'buy',
    underlying: 'ETH',
    quoted_currency: 'USD',
    quantity: '0.1',
    participant_code: buyer,
  });
  const second = await liquidityQuote(client, {
    side: 'buy',
    underlying: 'ETH',
    quoted_currency: 'USD',
    quantity: '0.2',
    participant_code: buyer,
  });
  const trades = [
    await executeLiquidity(client, first.quote_id),
    await executeLiquidity(client, second.quote_id),
  ];
  for (const { trade_id: tradeId } of trades) {
    const trade = await terminated(tradeId);
    assertVendorSchema({ message: trade }, 'GetTradeResponse');
    assert.equal(typeof trade.settled_timestamp, 'number');
    assert.deepEqual(
      trade.parties.map((p) => p.settlement_state),
      ['settled', 'settled'],
    );
  }
  // Floats: 0.9 - 0.3 - 0.6 = 1.1e-16 and 0.1 + 0.2 = 0.30000000000000004.
  assert.equal(await balanceOf(svc, buyer, 'USD'), '0');
  assert.equal(await balanceOf(svc, buyer, 'ETH'), '0.3');
});

test('trade_status_changed: accepted, active, terminated, each the GET object without the 12 fields of spec 2.4, plus timestamp', async () => {
  await fund(svc, platformCode, 'USD', '1000');
  const quote = await liquidityQuote(client, {
    side: 'buy',
    underlying: 'ETH',
    quoted_currency: 'USD',
    quantity: '1',
  });
  const { trade_id: tradeId } = await executeLiquidity(client, quote.quote_id);
  const trade = await terminated(tradeId);
  const notes = await eventually('three notifications', async () => {
    const rows = await notificationsOf(svc, `trade:${tradeId}`);
    return rows.length >= 3 ? rows : undefined;
  });
  assert.deepEqual(
    notes.map((n) => [n.payload_type, n.payload.trade_state]),
    [
      ['trade_status_changed', 'accepted'],
      ['trade_status_changed', 'active'],
      ['trade_status_changed', 'terminated'],
    ],
  );
  const expectedKeys = [
    ...Object.keys(trade).filter((k) => !SPEC_2_4_OMITTED.includes(k)),
    'timestamp',
  ].sort();
  for (const { payload } of notes) assert.deepEqual(Object.keys(payload).sort(), expectedKeys);
  // The last one is the terminated trade itself, field for field.
  const last = notes[2]!.payload;
  for (const key of expectedKeys.filter((k) => k !== 'timestamp')) {
    assert.deepEqual(last[key], (trade as Record<string, unknown>)[key], key);
  }
  assert.equal(last.timestamp, trade.settled_timestamp);
  assert.ok((notes[0]!.payload.timestamp as number) <= (notes[1]!.payload.timestamp as number));
});

test('account_balance.changed is recorded with the settlement for the available balances that moved', async () => {
  const buyer = (await svc.newParticipant(platformCode)).participant_code;
  await fund(svc, buyer, 'USD', '10');
  const quote = await liquidityQuote(client, {
    side: 'buy',
    underlying: 'ETH',
    quoted_currency: 'USD',
    quantity: '2',
    participant_code: buyer,
  });
  const { trade_id: tradeId } = await executeLiquidity(client, quote.quote_id);
  await terminated(tradeId);
  const rows = await svc.runtime.store.db
    .selectFrom('webhook_notifications')
    .select(['payload'])
    .where('payload_type', '=', 'account_balance.changed')
    .where('platform_code', '=', platformCode)
    .execute();
  const settled = rows
    .map(
      (r) =>
        r.payload as {
          participant_code: string;
          asset: string;
          balance: string;
          account_type: string;
          run_id: string;
        },
    )
    .filter((p) => p.participant_code === buyer && p.run_id === tradeId);
  assert.deepEqual(settled.map((p) => [p.account_type, p.asset, p.balance]).sort(), [
    ['available', 'ETH', '2'],
    ['available', 'USD', '4'],
  ]);
});

test('a tenant quotes and executes like the primary holder; balances move on the holder’s account', async () => {
  const holder = await svc.newParticipant(platformCode);
  const tenant = await svc.newParticipant(platformCode);
  const account = await svc.newCustomerAccount(platformCode, holder.participant_code, 'joint');
  const added = await client.send('POST', `/accounts/${account.zrn}/tenants`, {
    body: { participant_code: tenant.participant_code },
  });
  assert.equal(added.status, 202, JSON.stringify(added.body));
  await eventually('tenant in effect', async () => {
    const details = await client.send<{ message: { tenants: string[] } }>(
      'GET',
      `/accounts/${account.zrn}/details`,
    );
    return details.body.message?.tenants?.includes(tenant.participant_code) ? true : undefined;
  });
  await fund(svc, holder.participant_code, 'USD', '30', 'joint');

  const quote = await liquidityQuote(client, {
    side: 'buy',
    underlying: 'ETH',
    quoted_currency: 'USD',
    quantity: '10',
    participant_code: tenant.participant_code,
    account_label: 'joint',
  });
  assert.equal(quote.participant_code, tenant.participant_code);
  assert.equal(quote.obo_participant.participant_code, holder.participant_code);
  const { trade_id: tradeId } = await executeLiquidity(client, quote.quote_id);
  const trade = await terminated(tradeId);
  assert.equal(trade.parties[0]!.participant_code, holder.participant_code);
  assert.equal(trade.parties[0]!.trader, tenant.participant_code);
  assert.equal(trade.parties[0]!.zrn, account.zrn);
  assert.equal(await balanceOf(svc, holder.participant_code, 'USD', 'joint'), '0');
  assert.equal(await balanceOf(svc, holder.participant_code, 'ETH', 'joint'), '10');
  assert.equal(await balanceOf(svc, tenant.participant_code, 'ETH', 'joint'), '0');
});
