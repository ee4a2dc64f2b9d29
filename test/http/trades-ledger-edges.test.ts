import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { applyMovements } from '../../src/domain/balances/balances.service.ts';
import { newUuid } from '../../src/lib/ids.ts';
import { AccountsResource } from '../../src/sdk/resources/accounts.ts';
import { notificationsOf } from '../helpers/funding-fixtures.ts';
import { startTestService, type TestService } from '../helpers/test-service.ts';
import { executeLiquidity, fund, liquidityQuote, setPrices } from '../helpers/trades-fixtures.ts';

/**
 * Edges of trades and the ledger, found by review: an operator debit must leave what unsettled trades have
 * promised, `party_code` matches the parties only, and an operator-booked trade keeps the vendor's amount
 * limits. Settlement is far away (an hour), so the trades here stay unsettled.
 */
let svc: TestService;
before(async () => {
  svc = await startTestService({
    env: { SVC_SETTLEMENT_ACTIVE_AFTER_MS: '3600000', SVC_SETTLEMENT_TERMINATE_AFTER_MS: '3600000' },
  });
  await setPrices(svc, { 'BTC/USD': '50' });
});
after(() => svc?.close());

async function debit(participant: string, amount: string, label = 'general') {
  const res = await svc.operatorCall('POST', '/balances', {
    participant_code: participant,
    account_label: label,
    asset: 'USD',
    amount,
  });
  return { status: res.status, body: res.json as { errors?: string[]; message?: { balance: string } } };
}

test('an operator debit cannot take what unsettled trades have promised; the 400 names amount', async () => {
  const { platform, client } = await svc.newPlatform();
  const holder = (await svc.newParticipant(platform.platform_code)).participant_code;
  await fund(svc, holder, 'USD', '100');
  const quote = await liquidityQuote(client, {
    side: 'buy',
    underlying: 'BTC',
    quoted_currency: 'USD',
    quantity: '1',
    participant_code: holder,
  });
  await executeLiquidity(client, quote.quote_id); // promises 50 USD until it settles

  const refused = await debit(holder, '-80');
  assert.equal(refused.status, 400);
  assert.match(
    refused.body.errors![0]!,
    /^amount: insufficient balance: USD general has 100, of which 50 is promised/,
  );
  const overdrawn = await debit(holder, '-101');
  assert.equal(overdrawn.status, 400);
  assert.match(overdrawn.body.errors![0]!, /^amount: /);
  // Another account type is named as such: its balance is not the available one (probe).
  await svc.admin.post('/balances', {
    participant_code: holder,
    account_label: 'general',
    asset: 'USD',
    amount: '30',
    account_type: 'collateral',
  });
  const collateral = await svc.operatorCall('POST', '/balances', {
    participant_code: holder,
    account_label: 'general',
    asset: 'USD',
    amount: '-31',
    account_type: 'collateral',
  });
  assert.equal(collateral.status, 400, collateral.text);
  assert.deepEqual((collateral.json as { errors: string[] }).errors, [
    'amount: insufficient balance: USD general collateral has 30',
  ]);
  const allowed = await debit(holder, '-50');
  assert.equal(allowed.status, 200);
  assert.equal(allowed.body.message!.balance, '50', 'what is left is exactly what the trade needs');
});

test("party_code matches a trade's parties (holder, counterparty), not the tenant that made it", async () => {
  const { platform, client } = await svc.newPlatform();
  const code = platform.platform_code;
  const holder = (await svc.newParticipant(code)).participant_code;
  const tenant = (await svc.newParticipant(code)).participant_code;
  const { zrn } = await svc.newCustomerAccount(code, holder, 'joint');
  await new AccountsResource(client).addTenant(zrn, tenant);
  await svc.runtime.services.tenants.applyPending(code, zrn);
  await fund(svc, holder, 'USD', '100', 'joint');
  const quote = await liquidityQuote(client, {
    side: 'buy',
    underlying: 'BTC',
    quoted_currency: 'USD',
    quantity: '1',
    participant_code: tenant,
    account_label: 'joint',
  });
  const { trade_id: tradeId } = await executeLiquidity(client, quote.quote_id);
  const byParty = async (partyCode: string) =>
    (
      await client.send<{ message: Array<{ trade_id: string }> }>('GET', '/trades', {
        query: { party_code: partyCode },
      })
    ).body.message.map((t) => t.trade_id);
  assert.deepEqual(await byParty(holder), [tradeId]);
  assert.deepEqual(await byParty(tenant), [], 'the tenant is the trader, not a party');
});

test("an operator-booked trade keeps the vendor's 30-character amounts: 400 naming the field", async () => {
  const { platform } = await svc.newPlatform();
  const code = platform.platform_code;
  const participant = (await svc.newParticipant(code)).participant_code;
  const book = async (quantity: string, price: string) => {
    const res = await svc.operatorCall('POST', '/trades', {
      platform_code: code,
      participant_code: participant,
      side: 'buy',
      underlying: 'BTC',
      quoted_currency: 'USD',
      quantity,
      price,
    });
    return { status: res.status, body: res.json as { errors?: string[] } };
  };
  const longQuantity = await book('123456789012.123456789012345678', '1');
  assert.equal(longQuantity.status, 400);
  assert.match(longQuantity.body.errors![0]!, /^quantity: too large/);
  const longNotional = await book('123456789012.12345678', '123456789012.12345678');
  assert.equal(longNotional.status, 400);
  assert.match(longNotional.body.errors![0]!, /^price: too large for this quantity/);
  await fund(svc, participant, 'USD', '100');
  const booked = await book('2', '50');
  assert.equal(booked.status, 201, JSON.stringify(booked.body));
});

test("an account's movements are stamped after its last one, whichever order their runs read the time", async () => {
  // Probe: trades settling at once on one account read their times before waiting for its row, so they committed
  // in another order than their times, and the account's notifications went back in time; a receiver keeping
  // the newest by `timestamp` kept a balance that was not the last.
  const { platform, client } = await svc.newPlatform();
  const code = platform.platform_code;
  const holder = (await svc.newParticipant(code)).participant_code;
  const apply = (timestamp: number, change: string) =>
    svc.runtime.store.db.transaction().execute((trx) =>
      applyMovements(trx, { runId: newUuid(), runType: 'operator_adjustment', timestamp }, [
        {
          platformCode: code,
          participantCode: holder,
          accountLabel: 'general',
          asset: 'USD',
          change,
          movementType: 'deposit',
        },
      ]),
    );
  const later = Date.now();
  await apply(later, '5'); // the run that read its time last took the row first
  await apply(later - 1_000, '7');
  const notes = (await notificationsOf(svc, code, 'account_balance.changed')).map((n) => n.payload);
  assert.deepEqual(
    notes.map((p) => [
      p.balance,
      p.timestamp,
      (p.movements as Array<{ movement_timestamp: number }>)[0]!.movement_timestamp,
    ]),
    [
      ['5', later, later],
      ['12', later + 1, later + 1],
    ],
  );
  const accounts = await new AccountsResource(client).list({ account_owner: holder });
  assert.deepEqual(
    accounts.message.map((a) => [a.balance, a.last_update]),
    [['12', later + 1]],
    'the last balance is the newest',
  );
});
