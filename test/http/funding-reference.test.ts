import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { InsertQueryNode, sql } from 'kysely';
import { createFundingService } from '../../src/domain/funding/funding.service.ts';
import { ManualClock } from '../../src/lib/clock.ts';
import { holdingQueries } from '../helpers/held-queries.ts';
import { startTestService, type PlatformFixture, type TestService } from '../helpers/test-service.ts';
import {
  clientToken,
  fundQuote,
  newAccountHolder,
  notificationsOf,
  recordDeposit,
  setPrices,
  txId,
} from '../helpers/funding-fixtures.ts';

/**
 * Issue 6 point 4, spec 2.3 and wire-contract §6: a fund event carries the reference of the participant's
 * most recent funding session opened at or before the deposit, from either entry point, even hours later.
 * The service runs on a manual clock so that "hours later" costs no waiting.
 */
const HOUR = 3_600_000;
const clock = new ManualClock(Date.UTC(2026, 0, 5, 9, 0, 0));
let svc: TestService;
let platform: PlatformFixture;
before(async () => {
  svc = await startTestService({ clock });
  platform = await svc.newPlatform();
  await setPrices(svc);
});
after(() => svc?.close());

const tick = (ms = 1_000) => clock.advance(ms);

async function participant() {
  return (await newAccountHolder(svc, platform.platform.platform_code)).code;
}

async function apiSession(code: string, reference?: string, fundAsset = 'USDC.ETH') {
  tick();
  const quote = await fundQuote(platform.client, {
    participant_code: code,
    fund_asset: fundAsset,
    client_fund_id: reference,
  });
  return quote.deposit_address;
}

async function sdkSession(code: string, reference?: string) {
  tick();
  await clientToken(platform.client, { participant_code: code, reference_id: reference });
}

async function deposit(address: string, extra: { deposit_timestamp?: number } = {}) {
  tick();
  const event = await recordDeposit(svc, {
    deposit_address: address,
    quantity: '10',
    transaction_id: txId(),
    ...extra,
  });
  // The webhook carries the same reference as GET /fund/transactions.
  const note = (await notificationsOf(svc, platform.platform.platform_code, 'deposit_fund_complete')).find(
    (n) => n.resource_key === `fund:${event.fund_id}`,
  );
  assert.equal(note?.payload.reference_id, event.reference_id);
  const listed = await platform.client.request<{ message: Array<{ reference_id: string }> }>(
    'GET',
    '/fund/transactions',
    { query: { fund_id: event.fund_id } },
  );
  assert.equal(listed.message[0]?.reference_id, event.reference_id);
  return event.reference_id;
}

test('API session then SDK session: the later (SDK) reference wins', async () => {
  const code = await participant();
  const address = await apiSession(code, 'api-ref');
  await sdkSession(code, 'sdk-ref');
  assert.equal(await deposit(address), 'sdk-ref');
});

test('SDK session then API session: the later (API) client_fund_id wins', async () => {
  const code = await participant();
  await sdkSession(code, 'sdk-first');
  const address = await apiSession(code, 'api-second');
  assert.equal(await deposit(address), 'api-second');
});

test('a deposit long after the session still carries its reference', async () => {
  const code = await participant();
  const address = await apiSession(code, 'saved-address-ref');
  clock.advance(9 * HOUR);
  assert.equal(await deposit(address), 'saved-address-ref');
  // And again the next day, to the address the customer saved.
  clock.advance(24 * HOUR);
  assert.equal(await deposit(address), 'saved-address-ref');
});

test('a session without a reference after one with: ""', async () => {
  const code = await participant();
  const address = await apiSession(code, 'with-ref');
  assert.equal(await deposit(address), 'with-ref');
  await sdkSession(code);
  assert.equal(await deposit(address), '');
  await apiSession(code, 'with-ref-again');
  await apiSession(code);
  assert.equal(await deposit(address), '');
});

test('two participants interleaved keep their own references', async () => {
  const a = await participant();
  const b = await participant();
  const addressA = await apiSession(a, 'a-1');
  const addressB = await apiSession(b, 'b-1');
  await sdkSession(a, 'a-2');
  assert.equal(await deposit(addressB), 'b-1');
  await sdkSession(b, 'b-2');
  assert.equal(await deposit(addressA), 'a-2');
  assert.equal(await deposit(addressB), 'b-2');
  await apiSession(a, 'a-3', 'BTC.BTC');
  assert.equal(await deposit(addressB), 'b-2');
  assert.equal(
    await deposit(addressA),
    'a-3',
    'per participant, whatever the asset or address of the session',
  );
});

test('no session at all: ""', async () => {
  // An address exists only once a quote has opened a session, so "no session" is a deposit confirmed before
  // the participant's first session (an indexer catching up on an address it was told about early).
  const code = await participant();
  tick();
  const beforeAnySession = clock.now();
  const address = await apiSession(code, 'first-session');
  assert.equal(await deposit(address, { deposit_timestamp: beforeAnySession }), '');
  assert.equal(await deposit(address), 'first-session');
});

test('"at or before the deposit": a deposit confirmed before a later session carries the earlier reference', async () => {
  const code = await participant();
  const address = await apiSession(code, 'earlier');
  tick();
  const confirmedAt = clock.now();
  await sdkSession(code, 'later');
  assert.equal(await deposit(address, { deposit_timestamp: confirmedAt }), 'earlier');
  assert.equal(await deposit(address), 'later');
  // A deposit confirmed before any session of the participant: no session → "".
  assert.equal(await deposit(address, { deposit_timestamp: confirmedAt - 10 * HOUR }), '');
});

test('SDK tokens expire after one hour', async () => {
  const code = await participant();
  const { token } = await clientToken(platform.client, { participant_code: code });
  await svc.runtime.services.funding.verifyClientToken(token);
  clock.advance(HOUR - 1_000);
  await svc.runtime.services.funding.verifyClientToken(token);
  clock.advance(1_000);
  await assert.rejects(svc.runtime.services.funding.verifyClientToken(token), /token: expired/);
});

test('a session still being opened when a deposit arrives: the deposit waits for it and carries its reference', async () => {
  const code = await participant();
  const address = await apiSession(code, 'before');
  tick();
  // Another instance's funding service, whose new session is held written but uncommitted.
  const inserts = holdingQueries(
    svc.runtime.store.db,
    (node) => InsertQueryNode.is(node) && node.into?.table.identifier.name === 'funding_sessions',
  );
  const funding = createFundingService(svc.domainDeps({ db: inserts.db, clock }));
  const token = funding.issueClientToken(platform.platform.platform_code, {
    participant_code: code,
    permissions: ['fwc'],
    reference_id: 'during',
  });
  await inserts.reached;

  const depositDone = recordDeposit(svc, {
    deposit_address: address,
    quantity: '10',
    transaction_id: txId(),
  });
  // Either the deposit waits on the participant's funding lock (as it must), or it is recorded without the
  // session (the race): whichever comes first.
  let raced = false;
  const waiting = (async () => {
    while (!raced) {
      const { rows } = await sql<{ n: number }>`
        select count(*)::int as n from pg_stat_activity
        where datname = current_database() and wait_event_type = 'Lock' and wait_event = 'advisory'`.execute(
        svc.runtime.store.db,
      );
      if (rows[0]!.n > 0) return 'waiting' as const;
      await new Promise((resolve) => setTimeout(resolve, 20));
    }
    return 'stopped' as const;
  })();
  const first = await Promise.race([waiting, depositDone.then(() => 'recorded' as const)]);
  raced = true;
  inserts.release();
  await token;
  const event = await depositDone;
  assert.equal(first, 'waiting', 'the deposit did not wait for the session being opened');
  assert.equal(event.reference_id, 'during');
});
