import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { FundEvent } from '../../src/contract/funding.schemas.ts';
import { startTestService, type PlatformFixture, type TestService } from '../helpers/test-service.ts';
import { assertOtherPlatformForbidden } from '../helpers/ownership.ts';
import { assertVendorSchema } from '../helpers/vendor-schema.ts';
import {
  clientToken,
  fundQuote,
  newAccountHolder,
  recordDeposit,
  setPrices,
  txId,
} from '../helpers/funding-fixtures.ts';

/** Issue 6 point 5: GET /fund/transactions (spec 4.5): filters, pagination, newest first, ownership. */
interface Page {
  message: FundEvent[];
  page: number;
  page_size: number;
  total_pages: number;
}

let svc: TestService;
let owner: PlatformFixture;
let other: PlatformFixture;
let a: string;
let b: string;
let addressA: string;
let addressB: string;
let otherEvent: FundEvent;
const events: FundEvent[] = [];
const base = Date.now() - 10 * 60_000;

before(async () => {
  svc = await startTestService();
  owner = await svc.newPlatform();
  other = await svc.newPlatform();
  await setPrices(svc);
  a = (await newAccountHolder(svc, owner.platform.platform_code)).code;
  b = (await newAccountHolder(svc, owner.platform.platform_code)).code;
  addressA = (
    await fundQuote(owner.client, { participant_code: a, fund_asset: 'BTC.BTC', client_fund_id: 'ref-a' })
  ).deposit_address;
  addressB = (
    await fundQuote(owner.client, { participant_code: b, fund_asset: 'ETH.ETH', client_fund_id: 'ref-b' })
  ).deposit_address;
  // The deposits below are confirmed in the past: date the sessions before them (opened_at is otherwise
  // never updated, hence the cast).
  await svc.runtime.store.db
    .updateTable('funding_sessions')
    .set({ opened_at: new Date(base - 60_000) } as never)
    .execute();
  // Six events, one second apart, recorded out of order so that "newest first" is the list's doing.
  const plan: Array<[string, number, boolean]> = [
    [addressA, 3, true],
    [addressB, 0, true],
    [addressA, 5, false],
    [addressB, 1, true],
    [addressA, 2, true],
    [addressB, 4, true],
  ];
  for (const [address, second, success] of plan) {
    events.push(
      await recordDeposit(svc, {
        deposit_address: address,
        quantity: '1',
        transaction_id: txId(),
        deposit_timestamp: base + second * 1_000,
        ...(success ? {} : { success: false, reason: 'rejected by screening' }),
      }),
    );
  }
  const theirs = (await newAccountHolder(svc, other.platform.platform_code)).code;
  const theirAddress = (await fundQuote(other.client, { participant_code: theirs, fund_asset: 'SOL.SOL' }))
    .deposit_address;
  otherEvent = await recordDeposit(svc, {
    deposit_address: theirAddress,
    quantity: '1',
    transaction_id: txId(),
  });
});
after(() => svc?.close());

const list = (query: Record<string, string | number | boolean> = {}) =>
  owner.client.request<Page>('GET', '/fund/transactions', { query });

const byTime = (list: FundEvent[]) => [...list].sort((x, y) => y.deposit_timestamp - x.deposit_timestamp);

test("lists the platform's fund events newest first, in the vendor's shape, and nobody else's", async () => {
  const page = await list();
  assertVendorSchema(page, 'GetFundTransactionsResponse');
  assert.deepEqual(
    page.message.map((e) => e.fund_id),
    byTime(events).map((e) => e.fund_id),
  );
  assert.deepEqual(page.message, byTime(events), 'each item is the recorded fund event');
  assert.equal(page.page, 1);
  assert.equal(page.page_size, 50);
  assert.equal(page.total_pages, 1);
  assert.equal(page.message.length, 6);
  // Only the fields of the vendor's GetFundTransactionsResponse (no `count`: wire-contract §3).
  assert.deepEqual(Object.keys(page).sort(), ['message', 'page', 'page_size', 'total_pages']);
  assert.ok(!page.message.some((e) => e.fund_id === otherEvent.fund_id));
  assert.equal(page.message[0]!.reference_id, 'ref-a');
});

test('filters: participant_code, fund_asset, deposit_address, fund_id, reference_id, success', async () => {
  const ids = (page: Page) => page.message.map((e) => e.fund_id);
  const expect = (pick: (e: FundEvent) => boolean) => byTime(events.filter(pick)).map((e) => e.fund_id);
  assert.deepEqual(
    ids(await list({ participant_code: a })),
    expect((e) => e.participant_code === a),
  );
  assert.deepEqual(
    ids(await list({ fund_asset: 'ETH.ETH' })),
    expect((e) => e.fund_asset === 'ETH.ETH'),
  );
  assert.deepEqual(
    ids(await list({ deposit_address: addressB })),
    expect((e) => e.deposit_address === addressB),
  );
  assert.deepEqual(ids(await list({ fund_id: events[2]!.fund_id })), [events[2]!.fund_id]);
  assert.deepEqual(
    ids(await list({ reference_id: 'ref-b' })),
    expect((e) => e.reference_id === 'ref-b'),
  );
  assert.deepEqual(
    ids(await list({ success: false })),
    expect((e) => !e.success),
  );
  assert.deepEqual(
    ids(await list({ success: true, participant_code: a })),
    expect((e) => e.success && e.participant_code === a),
  );
  assert.deepEqual(ids(await list({ fund_asset: 'SOL.SOL' })), []);
});

test('filters: deposit_timestamp_gte, _gt, _lt, _lte', async () => {
  const at = (second: number) => base + second * 1_000;
  const seconds = (page: Page) => page.message.map((e) => (e.deposit_timestamp - base) / 1_000);
  assert.deepEqual(seconds(await list({ deposit_timestamp_gte: at(2) })), [5, 4, 3, 2]);
  assert.deepEqual(seconds(await list({ deposit_timestamp_gt: at(2) })), [5, 4, 3]);
  assert.deepEqual(seconds(await list({ deposit_timestamp_lt: at(2) })), [1, 0]);
  assert.deepEqual(seconds(await list({ deposit_timestamp_lte: at(2) })), [2, 1, 0]);
  assert.deepEqual(seconds(await list({ deposit_timestamp_gt: at(1), deposit_timestamp_lt: at(4) })), [3, 2]);
  // With a fraction of a millisecond (the vendor types these filters a number): exact bounds.
  assert.deepEqual(seconds(await list({ deposit_timestamp_gte: at(2) - 0.5 })), [5, 4, 3, 2]);
  assert.deepEqual(seconds(await list({ deposit_timestamp_gte: at(2) + 0.5 })), [5, 4, 3]);
  assert.deepEqual(seconds(await list({ deposit_timestamp_gt: at(2) - 0.5 })), [5, 4, 3, 2]);
  assert.deepEqual(seconds(await list({ deposit_timestamp_lt: at(2) + 0.5 })), [2, 1, 0]);
  assert.deepEqual(seconds(await list({ deposit_timestamp_lte: at(2) - 0.5 })), [1, 0]);
  // Read as written, not as a double (near 1.7e12 a double cannot tell T.0001 from T).
  assert.deepEqual(seconds(await list({ deposit_timestamp_gte: `${at(2)}.0001` })), [5, 4, 3]);
  assert.deepEqual(seconds(await list({ deposit_timestamp_lt: `${at(2)}.0001` })), [2, 1, 0]);
  // With an exponent, as a number is printed by many clients (Go's %g, Python's repr of a large float), read
  // exactly as at GET /trades (probe: refused here only).
  const exponent = (ms: number) => `${String(ms)[0]}.${String(ms).slice(1)}e+${String(ms).length - 1}`;
  assert.deepEqual(seconds(await list({ deposit_timestamp_gte: exponent(at(2)) })), [5, 4, 3, 2]);
  assert.deepEqual(seconds(await list({ deposit_timestamp_lt: exponent(at(2)).replace('e+', 'E') })), [1, 0]);
  for (const tooLate of ['999999999999999', '9999999999999999', '1e99']) {
    const refused = await owner.client.send<{ errors: string[] }>('GET', '/fund/transactions', {
      query: { deposit_timestamp_gte: tooLate },
    });
    assert.equal(refused.status, 400, tooLate);
    assert.match(refused.body.errors.join(), /^deposit_timestamp_gte: /);
  }
});

test('filter deposit_intent_id: the events of one SDK session', async () => {
  const c = (await newAccountHolder(svc, owner.platform.platform_code)).code;
  const address = (await fundQuote(owner.client, { participant_code: c, fund_asset: 'BTC.BTC' }))
    .deposit_address;
  const { deposit_intent_id } = await clientToken(owner.client, {
    participant_code: c,
    reference_id: 'intent',
  });
  const event = await recordDeposit(svc, { deposit_address: address, quantity: '1', transaction_id: txId() });
  const page = await list({ deposit_intent_id: deposit_intent_id! });
  assert.deepEqual(
    page.message.map((e) => e.fund_id),
    [event.fund_id],
  );
});

test('pagination: page and page_size (at most 50), newest first across pages', async () => {
  const six = { deposit_timestamp_lte: base + 5_000 };
  const first = await list({ ...six, page_size: 4 });
  assert.equal(first.page, 1);
  assert.equal(first.page_size, 4);
  assert.equal(first.total_pages, 2);
  assert.equal(first.message.length, 4);
  const second = await list({ ...six, page_size: 4, page: 2 });
  assert.equal(second.page, 2);
  assert.equal(second.message.length, 2);
  assert.deepEqual(
    [...first.message, ...second.message].map((e) => e.fund_id),
    byTime(events).map((e) => e.fund_id),
  );
  assert.deepEqual((await list({ ...six, page_size: 4, page: 3 })).message, []);
  assert.equal((await list({ ...six, page_size: 50 })).message.length, 6);
  assert.equal((await list({ ...six, page_size: 1 })).total_pages, 6);
});

test('every bad query parameter gets a 400 naming it; page_size over 50 → 400', async () => {
  const cases: Array<[Record<string, string>, string]> = [
    [{ page_size: '51' }, 'page_size'],
    [{ page_size: '0' }, 'page_size'],
    [{ page: '0' }, 'page'],
    [{ page: 'x' }, 'page'],
    [{ fund_id: 'not-a-uuid' }, 'fund_id'],
    [{ deposit_intent_id: 'nope' }, 'deposit_intent_id'],
    // A UUID as a URN: ajv-formats' uuid takes it, PostgreSQL's uuid type does not (it came back naming no field).
    [{ fund_id: 'urn:uuid:3fc51610-3dd9-409f-b531-38f78de8ca8a' }, 'fund_id'],
    [{ deposit_intent_id: 'urn:uuid:3fc51610-3dd9-409f-b531-38f78de8ca8a' }, 'deposit_intent_id'],
    [{ success: 'maybe' }, 'success'],
    [{ deposit_timestamp_gte: 'yesterday' }, 'deposit_timestamp_gte'],
    [{ deposit_timestamp_lt: '-5' }, 'deposit_timestamp_lt'],
    [{ fund_asset: 'btc' }, 'fund_asset'],
    [{ participant_code: 'TOOLONG1' }, 'participant_code'],
    [{ reference_id: 'r'.repeat(51) }, 'reference_id'],
    [{ colour: 'blue' }, 'colour'],
  ];
  for (const [query, field] of cases) {
    const res = await owner.client.send<{ errors: string[] }>('GET', '/fund/transactions', { query });
    assert.equal(res.status, 400, `${JSON.stringify(query)}: ${JSON.stringify(res.body)}`);
    assert.match(res.body.errors.join('\n'), new RegExp(`^${field}: `, 'm'), JSON.stringify(res.body));
  }
});

test("naming another platform's participant, fund event or address → 403 (cross-platform helper)", async () => {
  const theirs = await other.client.request<Page>('GET', '/fund/transactions');
  const event = theirs.message[0]!;
  // A session of theirs too (review: it was an empty page where the others are 403).
  const { deposit_intent_id } = await clientToken(other.client, {
    participant_code: event.participant_code,
    reference_id: 'theirs',
  });
  for (const query of [
    { fund_id: event.fund_id },
    { participant_code: event.participant_code },
    { deposit_address: event.deposit_address },
    { deposit_intent_id: deposit_intent_id! },
  ]) {
    await assertOtherPlatformForbidden(
      { method: 'GET', path: '/fund/transactions', options: { query } },
      { owner: other.client, other: owner.client },
    );
    // A fault of the input is a 400 first (wire-contract §9: input, then ownership; review).
    const bad = await owner.client.send<{ errors: string[] }>('GET', '/fund/transactions', {
      query: { ...query, deposit_timestamp_gte: '999999999999999' },
    });
    assert.equal(bad.status, 400, JSON.stringify(bad.body));
    assert.match(bad.body.errors[0]!, /^deposit_timestamp_gte: must be at most /);
  }
});
