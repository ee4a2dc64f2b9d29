import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import type { FundEvent } from '../../src/contract/funding.schemas.ts';
import { startTestService, type PlatformFixture, type TestService } from '../helpers/test-service.ts';
import { assertVendorSchema } from '../helpers/vendor-schema.ts';
import {
  clientToken,
  eventually,
  fundQuote,
  newAccountHolder,
  notificationsOf,
  recordDeposit,
  setPrices,
  txId,
} from '../helpers/funding-fixtures.ts';

/**
 * Issue 6 point 6 (wire-contract §5, §6): a funding session, opened by an SDK token with `fwc` or by a fund
 * quote, with no deposit within the expiry time produces a deposit_fund_complete notification with
 * success:false, reason `deposit session has expired.` and the session's reference. The expiry is configured
 * short and the job worker runs in the service; the tests poll with a deadline instead of sleeping.
 */
const EXPIRY_MS = 1_500;
let svc: TestService;
let platform: PlatformFixture;
before(async () => {
  svc = await startTestService({
    env: { SVC_ROLE: 'all', SVC_FUNDING_SESSION_EXPIRY_MS: String(EXPIRY_MS) },
  });
  platform = await svc.newPlatform();
  await setPrices(svc);
});
after(() => svc?.close());

const jobKey = (sessionId: string) => `funding-expiry:${sessionId}`;

async function jobPending(sessionId: string): Promise<boolean> {
  const row = await svc.runtime.store.db
    .withSchema('graphile_worker')
    .selectFrom('jobs' as never)
    .select('key' as never)
    .where('key' as never, '=', jobKey(sessionId) as never)
    .executeTakeFirst();
  return row !== undefined;
}

async function expiryEvents(sessionId: string) {
  return svc.runtime.store.db
    .selectFrom('fund_events')
    .selectAll()
    .where('session_id', '=', sessionId)
    .where('kind', '=', 'session_expired')
    .execute();
}

/**
 * The participant's `deposit session has expired.` notification, once the worker has recorded it: a failed
 * fund event with the session's reference and account, in the vendor's shape.
 */
async function expiryNotification(
  code: string,
  session: { reference_id: string; account_label: string },
): Promise<FundEvent & { reason?: string }> {
  const note = await eventually(async () => {
    const notes = await notificationsOf(svc, platform.platform.platform_code, 'deposit_fund_complete');
    return notes.find((n) => n.payload.participant_code === code);
  }, 'the expiry notification');
  const payload = note.payload as FundEvent & { reason?: string };
  assert.equal(payload.success, false);
  assert.equal(payload.status_reason, 'deposit session has expired.');
  assert.equal(payload.reason, 'deposit session has expired.');
  assert.equal(payload.reference_id, session.reference_id);
  assert.equal(payload.account_label, session.account_label);
  assert.equal(note.resource_key, `fund:${payload.fund_id}`);
  assertVendorSchema(payload, 'GetFundTransactionsEntity');
  return payload;
}

test('a token session with no deposit is reported expired, with its reference, once', async () => {
  const { code } = await newAccountHolder(svc, platform.platform.platform_code, 'trading');
  const { deposit_intent_id } = await clientToken(platform.client, {
    participant_code: code,
    reference_id: 'widget-session-77',
    deposit_details: { account_label: 'trading' },
  });
  const sessionId = deposit_intent_id!;
  assert.ok(await jobPending(sessionId), 'the expiry job is enqueued with the session');

  const payload = await expiryNotification(code, {
    reference_id: 'widget-session-77',
    account_label: 'trading',
  });
  assert.equal(payload.is_first_deposit, false);

  // Spec 2.2: a fund event delivered as a webhook is also returned by GET /fund/transactions.
  const listed = await platform.client.request<{ message: FundEvent[] }>('GET', '/fund/transactions', {
    query: { deposit_intent_id: sessionId },
  });
  const { reason: _reason, ...event } = payload;
  assert.deepEqual(listed.message, [event]);

  // Once, however often the job runs.
  await eventually(async () => !(await jobPending(sessionId)), 'the job to finish');
  assert.equal(await svc.runtime.services.funding.expireSession(sessionId), null);
  assert.equal((await expiryEvents(sessionId)).length, 1);
});

test('a deposit within the expiry time: its session does not expire; an older session without one does', async () => {
  const { code } = await newAccountHolder(svc, platform.platform.platform_code);
  const quote = await fundQuote(platform.client, {
    participant_code: code,
    fund_asset: 'BTC.BTC',
    client_fund_id: 'superseded-quote',
  });
  const { deposit_intent_id } = await clientToken(platform.client, {
    participant_code: code,
    reference_id: 'paid-in-time',
  });
  const event = await recordDeposit(svc, {
    deposit_address: quote.deposit_address,
    quantity: '0.01',
    transaction_id: txId(),
  });
  assert.equal(event.reference_id, 'paid-in-time');

  await eventually(async () => !(await jobPending(deposit_intent_id!)), 'the expiry job to run');
  await eventually(
    async () => !(await jobPending(quote.request_id)),
    "the quote session's expiry job to run",
  );
  assert.equal((await expiryEvents(deposit_intent_id!)).length, 0);
  // The deposit carries the most recent session (wire-contract §6), so the quote's session had none.
  assert.equal((await expiryEvents(quote.request_id)).length, 1);
  const notes = await notificationsOf(svc, platform.platform.platform_code, 'deposit_fund_complete');
  assert.deepEqual(
    notes
      .filter((n) => n.payload.participant_code === code)
      .map((n) => [n.payload.success, n.payload.reference_id]),
    [
      [true, 'paid-in-time'],
      [false, 'superseded-quote'],
    ],
  );
});

test('a fund quote session expires like a token session: same delay, same job, reference = client_fund_id', async () => {
  const { code } = await newAccountHolder(svc, platform.platform.platform_code, 'savings');
  const quote = await fundQuote(platform.client, {
    participant_code: code,
    fund_asset: 'ETH.ETH',
    account_label: 'savings',
    client_fund_id: 'checkout-4711',
  });
  const sessionId = quote.request_id;
  assert.ok(await jobPending(sessionId), 'the expiry job is enqueued with the session');
  const session = await svc.runtime.store.db
    .selectFrom('funding_sessions')
    .select(['opened_at', 'expires_at', 'source'])
    .where('session_id', '=', sessionId)
    .executeTakeFirstOrThrow();
  assert.equal(session.source, 'fund_rfq');
  assert.equal(session.expires_at!.getTime() - session.opened_at.getTime(), EXPIRY_MS);

  const payload = await expiryNotification(code, { reference_id: 'checkout-4711', account_label: 'savings' });
  assert.equal(payload.fund_asset, 'ETH.ETH');

  const listed = await platform.client.request<{ message: FundEvent[] }>('GET', '/fund/transactions', {
    query: { reference_id: 'checkout-4711' },
  });
  const { reason: _reason, ...event } = payload;
  assert.deepEqual(listed.message, [event]);

  await eventually(async () => !(await jobPending(sessionId)), 'the job to finish');
  assert.equal(await svc.runtime.services.funding.expireSession(sessionId), null);
  assert.equal((await expiryEvents(sessionId)).length, 1);
});

test('a token without fwc opens no session and schedules nothing', async () => {
  const { code } = await newAccountHolder(svc, platform.platform.platform_code);
  await clientToken(platform.client, { participant_code: code, permissions: ['onboarding'] });
  const sessions = await svc.runtime.store.db
    .selectFrom('funding_sessions')
    .select('session_id')
    .where('participant_code', '=', code)
    .execute();
  // The expiry job belongs to a session (its key is the session's), so no session means no job.
  assert.deepEqual(sessions, [], 'the token without fwc opened no session');
});
