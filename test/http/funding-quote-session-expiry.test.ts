import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { SelectQueryNode, sql, TableNode } from 'kysely';
import type { FundEvent } from '../../src/contract/funding.schemas.ts';
import { lockParticipantFunding } from '../../src/domain/funding/funding.repository.ts';
import { createFundingService } from '../../src/domain/funding/funding.service.ts';
import { ManualClock } from '../../src/lib/clock.ts';
import { heldTransaction, holdingQueries } from '../helpers/held-queries.ts';
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
 * wire-contract §5, §6: a funding session opened by `POST /fund/rfq` expires exactly like one opened by
 * `POST /client_auth_token` with `fwc`: after SVC_FUNDING_SESSION_EXPIRY_MS (30 min by default), by the same
 * job, as a failed fund event `deposit session has expired.` carrying the session's reference, here the
 * `client_fund_id`. The service runs on a manual clock and no worker: the test runs the job's work itself,
 * as the worker would at the job's run time (the worker path is covered by
 * test/integration/funding-session-expiry.test.ts).
 */
const MINUTE = 60_000;
const EXPIRY_MS = 30 * MINUTE;
const clock = new ManualClock(Date.now());
let svc: TestService;
let platform: PlatformFixture;
before(async () => {
  svc = await startTestService({ clock });
  platform = await svc.newPlatform();
  await setPrices(svc);
});
after(() => svc?.close());

async function expiryJob(sessionId: string) {
  return svc.runtime.store.db
    .withSchema('graphile_worker')
    .selectFrom('jobs' as never)
    .select(['task_identifier' as never, 'run_at' as never])
    .where('key' as never, '=', `funding-expiry:${sessionId}` as never)
    .executeTakeFirst() as Promise<{ task_identifier: string; run_at: Date } | undefined>;
}

async function sessionTimes(sessionId: string) {
  const row = await svc.runtime.store.db
    .selectFrom('funding_sessions')
    .select(['opened_at', 'expires_at'])
    .where('session_id', '=', sessionId)
    .executeTakeFirstOrThrow();
  return { opened: row.opened_at.getTime(), expires: row.expires_at?.getTime() };
}

test('a fund quote session is scheduled to expire like a token session: same delay, same job', async () => {
  assert.equal(svc.runtime.config.fundingSessionExpiryMs, EXPIRY_MS, 'the default is 30 min');
  const { code } = await newAccountHolder(svc, platform.platform.platform_code);
  const quote = await fundQuote(platform.client, {
    participant_code: code,
    fund_asset: 'USDC.ETH',
    client_fund_id: 'order-1',
  });
  clock.advance(1_000);
  const token = await clientToken(platform.client, { participant_code: code, reference_id: 'widget-1' });

  for (const sessionId of [quote.request_id, token.deposit_intent_id!]) {
    const { opened, expires } = await sessionTimes(sessionId);
    assert.equal(expires, opened + EXPIRY_MS, sessionId);
    const job = await expiryJob(sessionId);
    assert.ok(job, `expiry job of ${sessionId}`);
    assert.equal(job.task_identifier, 'funding.expire_session');
    assert.equal(new Date(job.run_at).getTime(), expires);
  }
});

test('with no deposit, the quote session is reported expired with reference_id = client_fund_id, once', async () => {
  const { code } = await newAccountHolder(svc, platform.platform.platform_code);
  const openedAt = clock.now();
  const quote = await fundQuote(platform.client, {
    participant_code: code,
    fund_asset: 'BTC.BTC',
    client_fund_id: 'order-2',
  });
  clock.advance(EXPIRY_MS);

  const event = await svc.runtime.services.funding.expireSession(quote.request_id);
  assert.ok(event, 'the session expired');
  assert.equal(event.success, false);
  assert.equal(event.status_reason, 'deposit session has expired.');
  assert.equal(event.reference_id, 'order-2');
  assert.equal(event.participant_code, code);
  assert.equal(event.fund_asset, 'BTC.BTC');
  assert.equal(event.deposit_address, quote.deposit_address, 'the address the quote showed');
  assert.equal(event.rate, quote.rate, 'the rate the quote showed');
  assert.deepEqual([event.quantity, event.notional], ['0', '0']);
  assert.equal(event.deposit_timestamp, openedAt + EXPIRY_MS);
  assertVendorSchema(event, 'GetFundTransactionsEntity');

  const notes = await notificationsOf(svc, platform.platform.platform_code, 'deposit_fund_complete');
  const mine = notes.filter((n) => n.payload.participant_code === code);
  assert.equal(mine.length, 1);
  const { reason, ...payload } = mine[0]!.payload as FundEvent & { reason?: string };
  assert.equal(reason, 'deposit session has expired.');
  assert.deepEqual(payload, event);

  const listed = await platform.client.request<{ message: FundEvent[] }>('GET', '/fund/transactions', {
    query: { reference_id: 'order-2' },
  });
  assert.deepEqual(listed.message, [event]);

  // The job may run again (a retry, a second worker): the expiry is reported once.
  assert.equal(await svc.runtime.services.funding.expireSession(quote.request_id), null);
});

test('a deposit within the expiry time: the quote session does not expire', async () => {
  const { code } = await newAccountHolder(svc, platform.platform.platform_code);
  const quote = await fundQuote(platform.client, {
    participant_code: code,
    fund_asset: 'ETH.ETH',
    client_fund_id: 'order-3',
  });
  clock.advance(EXPIRY_MS - MINUTE);
  const deposit = await recordDeposit(svc, {
    deposit_address: quote.deposit_address,
    quantity: '0.5',
    transaction_id: txId(),
  });
  assert.equal(deposit.reference_id, 'order-3');
  clock.advance(MINUTE);
  assert.equal(await svc.runtime.services.funding.expireSession(quote.request_id), null);
  const notes = await notificationsOf(svc, platform.platform.platform_code, 'deposit_fund_complete');
  assert.deepEqual(
    notes.filter((n) => n.payload.participant_code === code).map((n) => n.payload.success),
    [true],
  );
});

test('a deposit after the expiry that the job has not reported yet: the expiry is reported first, then the deposit', async () => {
  // Review: the credit came first and the job's "expired" after it, the last word on a reference whose deposit
  // was credited.
  const { code } = await newAccountHolder(svc, platform.platform.platform_code);
  const quote = await fundQuote(platform.client, {
    participant_code: code,
    fund_asset: 'ETH.ETH',
    client_fund_id: 'order-4',
  });
  clock.advance(EXPIRY_MS + MINUTE);
  const deposit = await recordDeposit(svc, {
    deposit_address: quote.deposit_address,
    quantity: '0.5',
    transaction_id: txId(),
  });
  assert.deepEqual([deposit.success, deposit.reference_id], [true, 'order-4']);
  const notes = await notificationsOf(svc, platform.platform.platform_code, 'deposit_fund_complete');
  assert.deepEqual(
    notes
      .filter((n) => n.payload.participant_code === code)
      .map((n) => [n.payload.success, n.payload.reference_id, n.payload.status_reason]),
    [
      [false, 'order-4', 'deposit session has expired.'],
      [true, 'order-4', ''],
    ],
  );
  assert.equal(
    await svc.runtime.services.funding.expireSession(quote.request_id),
    null,
    'the job finds it reported',
  );
});

test('every session of the participant that expired unreported before the deposit is reported first, oldest first', async () => {
  // A quote made again for the same order: the older session's expiry came after the credit (review).
  const { code } = await newAccountHolder(svc, platform.platform.platform_code);
  const older = await fundQuote(platform.client, {
    participant_code: code,
    fund_asset: 'ETH.ETH',
    client_fund_id: 'order-5',
  });
  clock.advance(MINUTE);
  const newer = await fundQuote(platform.client, {
    participant_code: code,
    fund_asset: 'ETH.ETH',
    client_fund_id: 'order-5',
  });
  clock.advance(EXPIRY_MS + MINUTE);
  const deposit = await recordDeposit(svc, {
    deposit_address: newer.deposit_address,
    quantity: '0.25',
    transaction_id: txId(),
  });
  const notes = await notificationsOf(svc, platform.platform.platform_code, 'deposit_fund_complete');
  const mine = notes.filter((n) => n.payload.participant_code === code).map((n) => n.payload);
  assert.deepEqual(
    mine.map((p) => [p.success, p.reference_id, p.deposit_timestamp]),
    [
      [false, 'order-5', (await sessionTimes(older.request_id)).expires],
      [false, 'order-5', (await sessionTimes(newer.request_id)).expires],
      [true, 'order-5', deposit.deposit_timestamp],
    ],
  );
  assert.ok(
    mine.every((p) => (p.fund_timestamp as number) <= deposit.fund_timestamp),
    'none of the expiries stamped after the deposit',
  );
  for (const quote of [older, newer])
    assert.equal(await svc.runtime.services.funding.expireSession(quote.request_id), null);
});

/**
 * A deposit that arrives 1 ms before its fund quote session expires, on another instance whose look-up of the
 * deposit address is held answered; meanwhile the clock moves `reportAfterMs` and the expiry job reports the session.
 */
async function depositWhileExpiryReported(clientFundId: string, reportAfterMs: number) {
  const { code } = await newAccountHolder(svc, platform.platform.platform_code);
  const quote = await fundQuote(platform.client, {
    participant_code: code,
    fund_asset: 'ETH.ETH',
    client_fund_id: clientFundId,
  });
  const { expires } = await sessionTimes(quote.request_id);
  clock.set(expires! - 1);
  const reads = holdingQueries(
    svc.runtime.store.db,
    (node) =>
      SelectQueryNode.is(node) &&
      !!node.from?.froms.some(
        (from) => TableNode.is(from) && from.table.identifier.name === 'deposit_addresses',
      ),
  );
  const recording = createFundingService(svc.domainDeps({ db: reads.db, clock })).recordDeposit({
    deposit_address: quote.deposit_address,
    quantity: '0.5',
    transaction_id: txId(),
  });
  await reads.reached;
  reads.stopHolding();
  clock.advance(reportAfterMs);
  const expired = await svc.runtime.services.funding.expireSession(quote.request_id);
  assert.equal(expired?.status_reason, 'deposit session has expired.');
  reads.release();
  const { event } = await recording;
  return { event, expired, expires: expires! };
}

test('a deposit that arrived before the expiry but waited while it was reported is stamped after it', async () => {
  // Review: the deposit read its time on arrival, before its participant's lock; the expiry job took the lock
  // meanwhile and reported "expired", and the deposit was then credited as made within that session.
  const { event, expired, expires } = await depositWhileExpiryReported('order-6', 2);
  assert.deepEqual([event.success, event.reference_id], [true, 'order-6']);
  assert.ok(
    event.deposit_timestamp > expires,
    `the deposit stamped ${event.deposit_timestamp - expires} ms from the expiry it came after`,
  );
  assert.ok(event.fund_timestamp >= expired.fund_timestamp, 'stamped in the order recorded');
});

test('a deposit that arrived before its quote expired keeps the quoted rate, however long it waited for its participant', async () => {
  // Review: stamped once it held the participant's lock, a deposit queued behind anything (another deposit, a
  // session being opened) past the quote's expiry lost the quoted rate, and no expiry had been reported.
  const { code } = await newAccountHolder(svc, platform.platform.platform_code);
  const quote = await fundQuote(platform.client, {
    participant_code: code,
    fund_asset: 'ETH.ETH',
    client_fund_id: 'order-7',
  });
  clock.set(quote.expiry_timestamp - 1);
  const { db } = svc.runtime.store;
  const other = await heldTransaction(db, (trx) => lockParticipantFunding(trx, code));
  try {
    const recording = svc.runtime.services.funding.recordDeposit({
      deposit_address: quote.deposit_address,
      quantity: '1',
      transaction_id: txId(),
    });
    await eventually(async () => {
      const { rows } = await sql<{ n: number }>`select count(*)::int as n from pg_stat_activity
        where datname = current_database() and wait_event_type = 'Lock' and wait_event = 'advisory'`.execute(
        db,
      );
      return rows[0]!.n > 0;
    }, 'the deposit waiting for the participant');
    clock.advance(5); // past the quote's expiry while it waits
    await other.release();
    const { event } = await recording;
    assert.equal(event.deposit_timestamp, quote.expiry_timestamp - 1, 'stamped at its arrival');
    assert.equal(event.rate, quote.rate, 'at the quoted rate');
    assert.equal(event.reference_id, 'order-7');
  } finally {
    await other.release();
  }
});

test('an expiry report of a session that had ended before the deposit arrived does not move the deposit', async () => {
  // Review: reported by a job on an instance 2 s ahead, an old token session's expiry moved a deposit that arrived
  // 1 s before its quote's expiry past it, to the price source's rate.
  const { code } = await newAccountHolder(svc, platform.platform.platform_code);
  const token = await clientToken(platform.client, { participant_code: code, reference_id: 'widget-old' });
  clock.advance(EXPIRY_MS + MINUTE);
  const quote = await fundQuote(platform.client, {
    participant_code: code,
    fund_asset: 'ETH.ETH',
    client_fund_id: 'order-8',
  });
  clock.set(quote.expiry_timestamp - 1_000);
  const ahead = createFundingService(
    svc.domainDeps({ db: svc.runtime.store.db, clock: new ManualClock(clock.now() + 2_000) }),
  );
  assert.ok(await ahead.expireSession(token.deposit_intent_id!), 'the old session reported');
  const { event } = await svc.runtime.services.funding.recordDeposit({
    deposit_address: quote.deposit_address,
    quantity: '1',
    transaction_id: txId(),
  });
  assert.deepEqual(
    [event.deposit_timestamp, event.rate, event.reference_id],
    [clock.now(), quote.rate, 'order-8'],
  );
});

test('a deposit moved past an expiry reported at the expiry ms itself lands after it, not on it', async () => {
  // Review: stamped at the report's ms, which can be the expiry's, the deposit counted as made within the session
  // it followed the expiry of.
  const { event, expires } = await depositWhileExpiryReported('order-9', 1); // the job runs at the expiry's ms
  assert.equal(event.deposit_timestamp, expires + 1);
});
