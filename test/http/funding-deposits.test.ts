import { randomBytes } from 'node:crypto';
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { parseArgs } from 'node:util';
import { sql } from 'kysely';
import { OPERATOR_COMMANDS, OPERATOR_OPTIONS } from '../../src/cli/operator-commands.ts';
import { Dec, Exact } from '../../src/lib/decimal.ts';
import { listMigrations } from '../../src/store/migrate.ts';
import type { FundEvent } from '../../src/contract/funding.schemas.ts';
import { startTestService, type PlatformFixture, type TestService } from '../helpers/test-service.ts';
import { assertVendorSchema } from '../helpers/vendor-schema.ts';
import {
  fundQuote,
  newAccountHolder,
  notificationsOf,
  postDeposit,
  recordDeposit,
  setPrices,
  TEST_PRICES,
  txId,
  usdBalance,
} from '../helpers/funding-fixtures.ts';

/** Issue 6 point 3: POST /admin/deposits records fund events (spec 2.2) with credit and webhooks. */
let svc: TestService;
let owner: PlatformFixture;
let feePlatform: PlatformFixture;
before(async () => {
  svc = await startTestService();
  owner = await svc.newPlatform();
  feePlatform = await svc.newPlatform();
  await setPrices(svc);
  await svc.runtime.store.db
    .updateTable('platforms')
    .set({ deposit_fee_bps: '25' })
    .where('platform_code', '=', feePlatform.platform.platform_code)
    .execute();
});
after(() => svc?.close());

async function addressOf(platform: PlatformFixture, fundAsset = 'BTC.BTC', reference?: string) {
  const holder = await newAccountHolder(svc, platform.platform.platform_code);
  const quote = await fundQuote(platform.client, {
    participant_code: holder.code,
    fund_asset: fundAsset,
    client_fund_id: reference,
  });
  return { code: holder.code, address: quote.deposit_address };
}

async function fundEventsOf(participantCode: string) {
  return svc.runtime.store.db
    .selectFrom('fund_events')
    .selectAll()
    .where('participant_code', '=', participantCode)
    .execute();
}

/** Spec 2.2, field by field: the exact wire type of each. */
function assertSpecTypes(event: Record<string, unknown>) {
  const strings = [
    'participant_code',
    'fund_asset',
    'quoted_currency',
    'source_address',
    'deposit_address',
    'status_reason',
    'transaction_id',
    'account_label',
    'fund_id',
    'raw_fee_bps',
    'deposit_fee_bps',
    'raw_fee_notional',
    'deposit_fee_notional',
    'deposited_asset',
    'reference_id',
  ];
  for (const field of strings) assert.equal(typeof event[field], 'string', field);
  for (const field of ['rate', 'quantity', 'notional'])
    assert.match(event[field] as string, /^(0|[1-9]\d*)(\.\d+)?$/, `${field} is a decimal string`);
  for (const field of ['success', 'is_first_deposit']) assert.equal(typeof event[field], 'boolean', field);
  for (const field of ['fund_timestamp', 'deposit_timestamp'])
    assert.ok(Number.isInteger(event[field]) && (event[field] as number) > 1e12, `${field} is epoch ms`);
  assert.match(event.fund_id as string, /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/);
  assert.equal(
    Object.keys(event).filter((k) => k !== 'reason').length,
    22,
    'exactly the 22 fields of spec 2.2',
  );
}

test('a deposit records the fund event with every spec 2.2 field, credits the balance and notifies', async () => {
  const { code, address } = await addressOf(owner, 'BTC.BTC', 'ref-1');
  const tx = txId();
  const event = await recordDeposit(svc, {
    deposit_address: address,
    quantity: '0.12345678',
    transaction_id: tx,
    source_address: 'bc1qsourcesourcesourcesourcesourcesourcesou',
  });
  assertSpecTypes(event as unknown as Record<string, unknown>);
  assertVendorSchema(event, 'GetFundTransactionsEntity');
  const notional = new Dec('0.12345678').times(TEST_PRICES['BTC/USD']).toFixed();
  assert.deepEqual(
    { ...event, fund_id: '', fund_timestamp: 0, deposit_timestamp: 0 },
    {
      participant_code: code,
      fund_asset: 'BTC.BTC',
      rate: TEST_PRICES['BTC/USD'],
      quoted_currency: 'USD',
      source_address: 'bc1qsourcesourcesourcesourcesourcesourcesou',
      deposit_address: address,
      quantity: '0.12345678',
      notional,
      success: true,
      status_reason: '',
      fund_timestamp: 0,
      deposit_timestamp: 0,
      transaction_id: tx,
      account_label: 'general',
      fund_id: '',
      is_first_deposit: true,
      raw_fee_bps: '',
      deposit_fee_bps: '',
      raw_fee_notional: '',
      deposit_fee_notional: '',
      deposited_asset: 'BTC',
      reference_id: 'ref-1',
    },
  );
  assert.equal(notional, '8024.721564195', 'quantity × rate in decimal arithmetic');

  // The credit: the notional in the quoted currency, on the holder's account.
  assert.equal(await usdBalance(svc, code), notional);
  const movements = await svc.runtime.store.db
    .selectFrom('balance_movements')
    .selectAll()
    .where('run_id', '=', event.fund_id)
    .execute();
  assert.equal(movements.length, 1);
  assert.equal(new Dec(movements[0]!.change).toFixed(), notional);
  assert.equal(movements[0]!.movement_type, 'deposit');

  // The notifications, written with the change.
  const funds = (await notificationsOf(svc, owner.platform.platform_code, 'deposit_fund_complete')).filter(
    (n) => n.resource_key === `fund:${event.fund_id}`,
  );
  assert.equal(funds.length, 1);
  assert.deepEqual(funds[0]!.payload, event);
  assertVendorSchema(funds[0]!.payload, 'GetFundTransactionsEntity');
  const balances = await notificationsOf(svc, owner.platform.platform_code, 'account_balance.changed');
  const credit = balances.find((n) => (n.payload as { run_id?: string }).run_id === event.fund_id);
  assert.ok(credit, 'account_balance.changed for the credit');
  assert.equal((credit.payload as { balance: string }).balance, notional);

  // is_first_deposit only the first time.
  const second = await recordDeposit(svc, {
    deposit_address: address,
    quantity: '1',
    transaction_id: txId(),
  });
  assert.equal(second.is_first_deposit, false);
  assert.equal(await usdBalance(svc, code), new Dec(notional).plus(TEST_PRICES['BTC/USD']).toFixed());
});

test("the platform's deposit fee is charged: fee fields filled and the credit is the notional less the fee", async () => {
  const { code, address } = await addressOf(feePlatform, 'ETH.ETH');
  const event = await recordDeposit(svc, { deposit_address: address, quantity: '2', transaction_id: txId() });
  const notional = new Dec('2').times(TEST_PRICES['ETH/USD']);
  const fee = notional.times(25).dividedBy(10_000);
  assert.equal(event.notional, notional.toFixed());
  assert.equal(event.raw_fee_bps, '25');
  assert.equal(event.deposit_fee_bps, '25');
  assert.equal(event.raw_fee_notional, fee.toFixed());
  assert.equal(event.deposit_fee_notional, fee.toFixed());
  assert.equal(await usdBalance(svc, code), notional.minus(fee).toFixed());
});

test('notional = quantity × rate to the last digit; the fee rounds up and the credit down to 18 decimals', async () => {
  const rate = '3200.123456789012345678';
  const quantity = `${'9'.repeat(30)}.${'9'.repeat(18)}`;
  await svc.admin.post('/prices', { pairs: { 'ETH/USD': rate } });
  try {
    const { code, address } = await addressOf(feePlatform, 'ETH.ETH'); // quoted at `rate`
    const before = new Exact((await usdBalance(svc, code)) ?? '0');
    const event = await recordDeposit(svc, { deposit_address: address, quantity, transaction_id: txId() });
    const notional = new Exact(quantity).times(rate);
    assert.equal(event.notional, notional.toFixed());
    assert.equal(notional.decimalPlaces(), 36);
    // The exact fee has 40 decimals; what the participant pays rounds up, what it receives down.
    const fee = notional.times(25).dividedBy(10_000).toDecimalPlaces(18, Exact.ROUND_CEIL);
    assert.equal(event.deposit_fee_notional, fee.toFixed());
    assert.equal(event.raw_fee_notional, fee.toFixed());
    const credit = notional.minus(fee).toDecimalPlaces(18, Exact.ROUND_FLOOR);
    const after = new Exact((await usdBalance(svc, code))!);
    assert.equal(after.minus(before).toFixed(), credit.toFixed());
    assert.ok(after.decimalPlaces() <= 18, `balance ${after.toFixed()} has more than 18 decimals`);
    // One digit more is refused with the bounds said (probe: "not in the expected form" named no limit).
    const tooLarge = await postDeposit(svc, {
      deposit_address: address,
      quantity: `1${quantity}`,
      transaction_id: txId(),
    });
    assert.equal(tooLarge.status, 400);
    assert.deepEqual(tooLarge.body.errors, [
      'quantity: is not in the expected form (positive decimal string, at most 30 digits before the point and 18 after)',
    ]);
  } finally {
    await svc.admin.post('/prices', { pairs: { 'ETH/USD': TEST_PRICES['ETH/USD'] } });
  }
});

test('a fee of the whole deposit (10,000 bps) is the notional rounded up to 18 decimals, and credits nothing', async () => {
  const setFee = (bps: string) =>
    svc.runtime.store.db
      .updateTable('platforms')
      .set({ deposit_fee_bps: bps })
      .where('platform_code', '=', feePlatform.platform.platform_code)
      .execute();
  const rate = '3200.123456789012345678';
  await svc.admin.post('/prices', { pairs: { 'ETH/USD': rate } });
  await setFee('10000');
  try {
    const { code, address } = await addressOf(feePlatform, 'ETH.ETH');
    const before = (await usdBalance(svc, code)) ?? '0';
    const quantity = '0.123456789012345679';
    const event = await recordDeposit(svc, { deposit_address: address, quantity, transaction_id: txId() });
    const notional = new Exact(quantity).times(rate);
    assert.equal(event.notional, notional.toFixed());
    assert.equal(event.deposit_fee_notional, notional.toDecimalPlaces(18, Exact.ROUND_CEIL).toFixed());
    assert.equal((await usdBalance(svc, code)) ?? '0', before);
  } finally {
    await setFee('25');
    await svc.admin.post('/prices', { pairs: { 'ETH/USD': TEST_PRICES['ETH/USD'] } });
  }
});

test('the same transaction_id twice records one event (also when reported concurrently)', async () => {
  const { code, address } = await addressOf(owner, 'SOL.SOL');
  const tx = txId();
  const first = await postDeposit(svc, { deposit_address: address, quantity: '3', transaction_id: tx });
  assert.equal(first.status, 201);
  const again = await postDeposit(svc, { deposit_address: address, quantity: '3', transaction_id: tx });
  assert.equal(again.status, 200);
  assert.deepEqual(again.body.message, first.body.message);

  const concurrentTx = txId();
  const results = await Promise.all(
    Array.from({ length: 6 }, () =>
      postDeposit(svc, { deposit_address: address, quantity: '1', transaction_id: concurrentTx }),
    ),
  );
  assert.deepEqual(results.map((r) => r.status).sort(), [200, 200, 200, 200, 200, 201]);
  assert.equal(new Set(results.map((r) => (r.body.message as FundEvent).fund_id)).size, 1);

  assert.equal((await fundEventsOf(code)).length, 2);
  const expected = new Dec(4).times(TEST_PRICES['SOL/USD']).toFixed();
  assert.equal(await usdBalance(svc, code), expected, 'credited once per transaction');
  const notes = await notificationsOf(svc, owner.platform.platform_code, 'deposit_fund_complete');
  const ids = new Set((await fundEventsOf(code)).map((e) => `fund:${e.fund_id}`));
  assert.equal(notes.filter((n) => ids.has(n.resource_key)).length, 2);

  // The same id with other data is a conflict, not a silent replay.
  const changed = await postDeposit(svc, { deposit_address: address, quantity: '4', transaction_id: tx });
  assert.equal(changed.status, 409);
  assert.match((changed.body.errors as string[])[0]!, /^transaction_id: /);
});

test('a transaction id or address with white space, or not printable, is refused, not recorded as another transaction', async () => {
  const { code, address } = await addressOf(owner, 'SOL.SOL');
  const tx = txId();
  assert.equal(
    (await postDeposit(svc, { deposit_address: address, quantity: '1', transaction_id: tx })).status,
    201,
  );
  for (const [field, value] of [
    ['transaction_id', ` ${tx}`],
    ['transaction_id', `${tx}\n`],
    ['transaction_id', ' '],
    ['transaction_id', `${tx.slice(0, 10)}é${tx.slice(10)}`],
    ['source_address', ' '],
    ['deposit_address', ` ${address}`],
  ] as const) {
    const res = await postDeposit(svc, {
      deposit_address: address,
      quantity: '1',
      transaction_id: tx,
      [field]: value,
    });
    assert.equal(res.status, 400, `${field} ${JSON.stringify(value)}`);
    assert.match(
      (res.body.errors as string[])[0]!,
      new RegExp(`^${field}: .*printable ASCII without white space`),
    );
  }
  assert.equal((await fundEventsOf(code)).length, 1, 'credited once');
});

test('a report of the same transaction with another source address, time or reason is a conflict, not a replay', async () => {
  const { address } = await addressOf(owner, 'ETH.ETH');
  const source = `0x${randomBytes(20).toString('hex')}`;
  const at = Date.now() - 60_000;
  const report = { deposit_address: address, quantity: '1', source_address: source, deposit_timestamp: at };
  const tx = txId();
  assert.equal((await postDeposit(svc, { ...report, transaction_id: tx })).status, 201);
  // Again as sent, the source address in other letters (one EVM address), or naming less: a replay.
  for (const again of [
    report,
    { ...report, source_address: source.toUpperCase().replace('0X', '0x') },
    { deposit_address: address, quantity: '1.000' },
  ]) {
    const res = await postDeposit(svc, { ...again, transaction_id: tx });
    assert.equal(res.status, 200, JSON.stringify(res.body));
  }
  // Each that differs is named with what is recorded (review: "other data" sent support to the database).
  for (const [other, recorded] of [
    [{ ...report, source_address: `0x${randomBytes(20).toString('hex')}` }, `source_address "${source}"`],
    [{ ...report, deposit_timestamp: at - 1 }, `deposit_timestamp ${at}`],
    [{ ...report, quantity: '2', deposit_timestamp: at + 1 }, `quantity 1, deposit_timestamp ${at}`],
  ] as const) {
    const res = await postDeposit(svc, { ...other, transaction_id: tx });
    assert.equal(res.status, 409, JSON.stringify(res.body));
    assert.equal(
      (res.body.errors as string[])[0]!,
      `transaction_id: ${tx} is already recorded for this address with other data (recorded: ${recorded}; svc deposits find --tx shows it)`,
    );
  }
  const failed = { deposit_address: address, quantity: '2', success: false, reason: 'reverted' };
  const failedTx = txId();
  assert.equal((await postDeposit(svc, { ...failed, transaction_id: failedTx })).status, 201);
  assert.equal((await postDeposit(svc, { ...failed, transaction_id: failedTx })).status, 200);
  const otherReason = await postDeposit(svc, { ...failed, reason: 'dropped', transaction_id: failedTx });
  assert.equal(otherReason.status, 409, JSON.stringify(otherReason.body));
});

test('a hex transaction hash (Bitcoin, EVM) is one transaction in any letter case; a Solana signature is not', async () => {
  const eth = await addressOf(owner, 'ETH.ETH');
  const hash = `0x${randomBytes(32).toString('hex').toUpperCase()}`;
  const first = await postDeposit(svc, { deposit_address: eth.address, quantity: '1', transaction_id: hash });
  assert.equal(first.status, 201);
  assert.equal((first.body.message as FundEvent).transaction_id, hash.toLowerCase());
  // An indexer retrying with the hash in lower case (and the address too): the same deposit, credited once.
  const again = await postDeposit(svc, {
    deposit_address: eth.address.toLowerCase(),
    quantity: '1',
    transaction_id: hash.toLowerCase(),
  });
  assert.equal(again.status, 200);
  assert.deepEqual(again.body.message, first.body.message);
  assert.equal(await usdBalance(svc, eth.code), new Dec(TEST_PRICES['ETH/USD']).toFixed());

  // base58 is case-sensitive: two signatures that differ in case are two transactions.
  const sol = await addressOf(owner, 'SOL.SOL');
  const signature = `5VERv8NMvzbJMEkV8xnrLkEaWRtSz9CosKDYjCJjBRnb${randomBytes(4).toString('hex')}`;
  const upper = await postDeposit(svc, {
    deposit_address: sol.address,
    quantity: '1',
    transaction_id: signature,
  });
  const lower = await postDeposit(svc, {
    deposit_address: sol.address,
    quantity: '1',
    transaction_id: signature.toLowerCase(),
  });
  assert.deepEqual([upper.status, lower.status], [201, 201]);
});

test('a transaction hash is one transaction whatever its prefix: 0x on EVM, none on Bitcoin', async () => {
  // `0xab…`, `ab…` and `0XAB…` were three deposits of one transaction, each credited.
  const eth = await addressOf(owner, 'ETH.ETH');
  const digits = randomBytes(32).toString('hex');
  const first = await postDeposit(svc, {
    deposit_address: eth.address,
    quantity: '1',
    transaction_id: `0X${digits.toUpperCase()}`,
  });
  assert.equal(first.status, 201);
  assert.equal((first.body.message as FundEvent).transaction_id, `0x${digits}`);
  for (const written of [digits.toUpperCase(), `0x${digits}`, digits]) {
    const again = await postDeposit(svc, {
      deposit_address: eth.address,
      quantity: '1',
      transaction_id: written,
    });
    assert.equal(again.status, 200, written);
  }
  assert.equal(await usdBalance(svc, eth.code), new Dec(TEST_PRICES['ETH/USD']).toFixed(), 'credited once');

  // A deposit recorded without a transaction id gets one in that form too: reported again with it, a replay.
  const generated = await postDeposit(svc, { deposit_address: eth.address, quantity: '2' });
  assert.equal(generated.status, 201);
  const generatedId = (generated.body.message as FundEvent).transaction_id;
  assert.match(generatedId, /^0x[0-9a-f]{64}$/);
  for (const written of [generatedId, generatedId.slice(2)]) {
    const again = await postDeposit(svc, {
      deposit_address: eth.address,
      quantity: '2',
      transaction_id: written,
    });
    assert.equal(again.status, 200, written);
  }
  assert.equal(await usdBalance(svc, eth.code), new Dec(TEST_PRICES['ETH/USD']).times(3).toFixed());

  const btc = await addressOf(owner, 'BTC.BTC');
  const txid = randomBytes(32).toString('hex');
  const mined = await postDeposit(svc, {
    deposit_address: btc.address,
    quantity: '1',
    transaction_id: `0x${txid}`,
  });
  assert.equal((mined.body.message as FundEvent).transaction_id, txid, 'a txid has no prefix');
  const replay = await postDeposit(svc, {
    deposit_address: btc.address,
    quantity: '1',
    transaction_id: txid,
  });
  assert.equal(replay.status, 200);
});

test('migration 0019 brings recorded hashes to that form, and leaves the pairs already credited twice', async () => {
  const eth = await addressOf(owner, 'ETH.ETH');
  const btc = await addressOf(owner, 'BTC.BTC');
  const [a, b, c, d] = Array.from({ length: 4 }, () => randomBytes(32).toString('hex'));
  const record = async (address: string, transactionId: string) =>
    (
      (await postDeposit(svc, { deposit_address: address, quantity: '1', transaction_id: transactionId }))
        .body.message as FundEvent
    ).fund_id;
  const ids = {
    ethBare: await record(eth.address, a!),
    btcPrefixed: await record(btc.address, b!),
    twiceFirst: await record(eth.address, c!),
    twiceSecond: await record(eth.address, d!),
  };
  // As recorded before 0019 (0017 lower-cased `0x…` and bare ids, and left `0X…` alone).
  const setId = (fundId: string, transactionId: string) =>
    sql`update fund_events set transaction_id = ${transactionId} where fund_id = ${fundId}`.execute(
      svc.runtime.store.db,
    );
  await setId(ids.ethBare, a!);
  await setId(ids.btcPrefixed, `0X${b!.toUpperCase()}`);
  await setId(ids.twiceSecond, `0X${c!.toUpperCase()}`); // the same transaction as twiceFirst's `0x${c}`

  const migration = (await listMigrations()).find((m) => m.version === '0019')!;
  const client = await svc.runtime.store.pool.connect();
  try {
    await client.query(migration.sql);
  } finally {
    client.release();
  }
  const stored = async (fundId: string) =>
    (
      await svc.runtime.store.db
        .selectFrom('fund_events')
        .select('transaction_id')
        .where('fund_id', '=', fundId)
        .executeTakeFirstOrThrow()
    ).transaction_id;
  assert.equal(await stored(ids.ethBare), `0x${a}`);
  assert.equal(await stored(ids.btcPrefixed), b);
  assert.equal(await stored(ids.twiceFirst), `0x${c}`);
  assert.equal(await stored(ids.twiceSecond), `0X${c!.toUpperCase()}`, 'left for the operator');
});

test('a report of success after a report of failure for one transaction is a conflict, not a replay', async () => {
  const { code, address } = await addressOf(owner, 'SOL.SOL');
  const tx = txId();
  const failed = { deposit_address: address, quantity: '2', transaction_id: tx, success: false };
  const first = await postDeposit(svc, { ...failed, reason: 'pending confirmations' });
  assert.equal(first.status, 201);
  // The same failure again is a replay.
  const again = await postDeposit(svc, { ...failed, reason: 'pending confirmations' });
  assert.equal(again.status, 200);
  assert.deepEqual(again.body.message, first.body.message);
  // Success for it now: answered as a conflict that says why, not 200 with the failed event (nothing credited).
  const flipped = await postDeposit(svc, { deposit_address: address, quantity: '2', transaction_id: tx });
  assert.equal(flipped.status, 409);
  assert.deepEqual(flipped.body.errors, [
    `transaction_id: ${tx} is already recorded for this address as failed (pending confirmations)`,
  ]);
  assert.equal(await usdBalance(svc, code), undefined, 'nothing credited');
});

test('a replay that does not name the asset is a replay even after the address was quoted for another asset', async () => {
  const holder = await newAccountHolder(svc, owner.platform.platform_code);
  const usdc = await fundQuote(owner.client, { participant_code: holder.code, fund_asset: 'USDC.ETH' });
  const tx = txId();
  const first = await postDeposit(svc, {
    deposit_address: usdc.deposit_address,
    quantity: '20',
    transaction_id: tx,
  });
  assert.equal((first.body.message as FundEvent).fund_asset, 'USDC.ETH');
  await fundQuote(owner.client, { participant_code: holder.code, fund_asset: 'ETH.ETH' });
  const again = await postDeposit(svc, {
    deposit_address: usdc.deposit_address,
    quantity: '20',
    transaction_id: tx,
  });
  assert.equal(again.status, 200);
  assert.deepEqual(again.body.message, first.body.message);
  const otherAsset = await postDeposit(svc, {
    deposit_address: usdc.deposit_address,
    quantity: '20',
    transaction_id: tx,
    fund_asset: 'ETH.ETH',
  });
  assert.equal(otherAsset.status, 409);
});

test('an unknown deposit address → 404 saying so', async () => {
  const res = await postDeposit(svc, {
    deposit_address: 'bc1qunknownunknownunknownunknownunknownunk',
    quantity: '1',
  });
  assert.equal(res.status, 404);
  assert.deepEqual(res.body, {
    error: 'Not Found',
    message: 'deposit_address: not a deposit address of this service',
  });
});

test('a failed deposit is recorded and notified with its reason, and credits nothing', async () => {
  const { code, address } = await addressOf(owner, 'USDC.ETH', 'ref-failed');
  const event = await recordDeposit(svc, {
    deposit_address: address,
    quantity: '250',
    transaction_id: txId(),
    success: false,
    reason: 'source address failed screening',
  });
  assertSpecTypes(event as unknown as Record<string, unknown>);
  assert.equal(event.success, false);
  assert.equal(event.status_reason, 'source address failed screening');
  assert.equal(event.fund_asset, 'USDC.ETH', 'the asset of the quote for that address');
  assert.equal(event.reference_id, 'ref-failed');
  assert.equal(event.is_first_deposit, false);
  assert.equal(event.deposit_fee_notional, '');
  assert.equal(await usdBalance(svc, code), undefined, 'no balance row, no movement');
  const note = (await notificationsOf(svc, owner.platform.platform_code, 'deposit_fund_complete')).find(
    (n) => n.resource_key === `fund:${event.fund_id}`,
  );
  assert.ok(note);
  assert.equal(note.payload.success, false);
  assert.equal(note.payload.status_reason, 'source address failed screening');
  assert.equal(note.payload.reason, 'source address failed screening');
  const balanceNotes = await notificationsOf(svc, owner.platform.platform_code, 'account_balance.changed');
  assert.equal(
    balanceNotes.filter((n) => (n.payload as { run_id?: string }).run_id === event.fund_id).length,
    0,
  );
});

test('the fund event, the credit and both notifications commit together or not at all', async () => {
  const { code, address } = await addressOf(owner, 'BTC.BTC');
  // Make the last write of the use case (the fund notification) fail inside the database.
  await sql`create function fail_fund_notification() returns trigger language plpgsql as $$
    begin raise exception 'injected failure'; end $$`.execute(svc.runtime.store.db);
  await sql`create trigger fail_fund_notification before insert on webhook_notifications for each row
    when (new.payload_type = 'deposit_fund_complete') execute function fail_fund_notification()`.execute(
    svc.runtime.store.db,
  );
  try {
    const res = await postDeposit(svc, { deposit_address: address, quantity: '1', transaction_id: txId() });
    assert.equal(res.status, 500);
  } finally {
    await sql`drop trigger fail_fund_notification on webhook_notifications`.execute(svc.runtime.store.db);
    await sql`drop function fail_fund_notification()`.execute(svc.runtime.store.db);
  }
  assert.equal((await fundEventsOf(code)).length, 0);
  assert.equal(await usdBalance(svc, code), undefined);
  const balanceNotes = await notificationsOf(svc, owner.platform.platform_code, 'account_balance.changed');
  assert.equal(
    balanceNotes.filter((n) => (n.payload as { participant_code?: string }).participant_code === code).length,
    0,
  );
});

test('every bad field gets a 400 naming it', async () => {
  const { address } = await addressOf(owner, 'ETH.ETH');
  const cases: Array<[Record<string, unknown>, string[]]> = [
    [{}, ['deposit_address', 'quantity']],
    [{ deposit_address: address, quantity: 'abc', extra: 1 }, ['quantity', 'extra']],
    [{ deposit_address: address, quantity: 5 }, ['quantity']],
    [{ deposit_address: address, quantity: '0' }, ['quantity']],
    [{ deposit_address: address, quantity: '-1' }, ['quantity']],
    // Finer than any chain's unit, or beyond any supply.
    [{ deposit_address: address, quantity: `0.${'1'.repeat(19)}` }, ['quantity']],
    [{ deposit_address: address, quantity: '1'.repeat(31) }, ['quantity']],
    [{ deposit_address: address, quantity: '1', success: 'no' }, ['success']],
    [{ deposit_address: address, quantity: '1', success: false }, ['reason']],
    [{ deposit_address: address, quantity: '1', reason: 'why' }, ['reason']],
    // The reason is shown as the fund event's status_reason and sent in webhooks: printable, not blank.
    [{ deposit_address: address, quantity: '1', success: false, reason: 'reverted\u0007' }, ['reason']],
    [{ deposit_address: address, quantity: '1', success: false, reason: 'line\nbreak' }, ['reason']],
    [{ deposit_address: address, quantity: '1', success: false, reason: '\u202eyrevocer' }, ['reason']],
    [{ deposit_address: address, quantity: '1', success: false, reason: '   ' }, ['reason']],
    [
      { deposit_address: address, quantity: '1', deposit_timestamp: Date.now() + 3_600_000 },
      ['deposit_timestamp'],
    ],
    // A time in seconds (as X-SCX-TIMESTAMP is written), or none at all: not a deposit made in 1970.
    [
      { deposit_address: address, quantity: '1', deposit_timestamp: Math.floor(Date.now() / 1000) },
      ['deposit_timestamp'],
    ],
    [{ deposit_address: address, quantity: '1', deposit_timestamp: 0 }, ['deposit_timestamp']],
    [{ deposit_address: address, quantity: '1', fund_asset: 'BTC.BTC' }, ['fund_asset']],
    [{ deposit_address: address, quantity: '1', fund_asset: 'DOGE.DOGE' }, ['fund_asset']],
  ];
  for (const [body, fields] of cases) {
    const res = await postDeposit(svc, body);
    assert.equal(res.status, 400, JSON.stringify(body));
    const errors = (res.body.errors as string[]).join('\n');
    for (const field of fields) assert.match(errors, new RegExp(`^${field}: `, 'm'), `${field} in ${errors}`);
  }
});

test('the indexer may name the asset on the address network and the confirmation time', async () => {
  const { address } = await addressOf(owner, 'ETH.ETH');
  const at = Date.now() - 60_000;
  const event = await recordDeposit(svc, {
    deposit_address: address,
    quantity: '100.5',
    fund_asset: 'USDT.ETH',
    deposit_timestamp: at,
    transaction_id: txId(),
  });
  assert.equal(event.fund_asset, 'USDT.ETH');
  assert.equal(event.deposited_asset, 'USDT');
  assert.equal(event.rate, TEST_PRICES['USDT/USD']);
  assert.equal(event.notional, new Dec('100.5').times(TEST_PRICES['USDT/USD']).toFixed());
  assert.equal(event.deposit_timestamp, at);
  assert.ok(event.fund_timestamp >= at);
});

test('svc deposits record: the operator command records a deposit, failed ones too', async () => {
  const { address } = await addressOf(owner, 'BTC.BTC', 'cli-ref');
  const tx = txId();
  const run = async (argv: string[]) => {
    const { values, positionals } = parseArgs({
      args: argv,
      options: OPERATOR_OPTIONS,
      allowPositionals: true,
    });
    return OPERATOR_COMMANDS['deposits record']!.run(
      svc.admin,
      positionals.slice(2),
      values,
    ) as Promise<FundEvent>;
  };
  const ok = await run(['deposits', 'record', address, '0.5', '--tx', tx, '--source', 'bc1qsource']);
  assert.equal(ok.success, true);
  assert.equal(ok.transaction_id, tx);
  assert.equal(ok.source_address, 'bc1qsource');
  assert.equal(ok.reference_id, 'cli-ref');
  const failed = await run(['deposits', 'record', address, '0.25', '--failed', '--reason', 'dust']);
  assert.equal(failed.success, false);
  assert.equal(failed.status_reason, 'dust');
  await assert.rejects(run(['deposits', 'record', address, '1', '--failed']), /--failed needs --reason/);
  // Alone, the reason was dropped and a successful deposit recorded.
  await assert.rejects(
    run(['deposits', 'record', address, '1', '--reason', 'dust']),
    /--reason goes with --failed/,
  );
});
