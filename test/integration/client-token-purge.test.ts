import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { parseCronItems } from 'graphile-worker';
import { sql } from 'kysely';
import pg from 'pg';
import {
  CLIENT_TOKEN_LIFETIME_MS,
  CLIENT_TOKEN_RETENTION_MS,
  PURGE_TOKENS_TASK,
} from '../../src/domain/funding/funding.service.ts';
import { buildTaskList, cronItems } from '../../src/jobs/task-list.ts';
import { ManualClock } from '../../src/lib/clock.ts';
import { startTestService, type PlatformFixture, type TestService } from '../helpers/test-service.ts';
import {
  clientToken,
  newAccountHolder,
  recordDeposit,
  setPrices,
  txId,
} from '../helpers/funding-fixtures.ts';

/**
 * SDK tokens a day past their expiry are purged by an hourly job: every POST /client_auth_token writes a row, and
 * without the purge the table only grew (soak probe). The funding sessions the tokens opened stay, with their
 * references; a purged token revoked again answers as any expired one.
 */
const clock = new ManualClock(Date.UTC(2026, 5, 1, 8, 0, 0));
let svc: TestService;
let owner: PlatformFixture;
let other: PlatformFixture;

before(async () => {
  svc = await startTestService({ clock });
  await setPrices(svc);
  owner = await svc.newPlatform();
  other = await svc.newPlatform();
});
after(() => svc?.close());

const funding = () => svc.runtime.services.funding;
const db = () => svc.runtime.store.db;

async function tokenIds(): Promise<Set<string>> {
  const rows = await db().selectFrom('client_auth_tokens').select('jti').execute();
  return new Set(rows.map((r) => r.jti));
}

function jtiOf(token: string): string {
  return (JSON.parse(Buffer.from(token.split('.')[1]!, 'base64url').toString()) as { jti: string }).jti;
}

test('tokens a day past their expiry are purged; the sessions they opened keep their references', async () => {
  const { code } = await newAccountHolder(svc, owner.platform.platform_code);
  const old = await clientToken(owner.client, { participant_code: code, reference_id: 'order-old' });
  const profile = await clientToken(owner.client, {
    participant_code: code,
    permissions: ['participant-profile'],
  });
  clock.advance(CLIENT_TOKEN_LIFETIME_MS + CLIENT_TOKEN_RETENTION_MS - 60_000);
  const expiredRecently = await clientToken(owner.client, {
    participant_code: code,
    permissions: ['crypto-pay'],
  });
  clock.advance(2 * 60_000); // `old` and `profile` expired a day and a minute ago; `expiredRecently` is live
  const live = await clientToken(owner.client, { participant_code: code, permissions: ['crypto-pay'] });

  assert.equal(await funding().purgeExpiredTokens(), 2);
  const left = await tokenIds();
  for (const purged of [old, profile]) assert.equal(left.has(jtiOf(purged.token)), false, 'purged');
  for (const kept of [expiredRecently, live]) assert.ok(left.has(jtiOf(kept.token)), 'kept');
  await funding().verifyClientToken(live.token);

  // The session the purged token opened is still there, its token id cleared, and a deposit to the participant's
  // address still carries the reference of its most recent session.
  const session = await db()
    .selectFrom('funding_sessions')
    .select(['source', 'token_jti', 'reference_id'])
    .where('session_id', '=', old.deposit_intent_id!)
    .executeTakeFirstOrThrow();
  assert.deepEqual(session, { source: 'client_auth_token', token_jti: null, reference_id: 'order-old' });
  const address = (
    await owner.client.request<{ message: { deposit_address: string } }>('POST', '/fund/rfq', {
      body: { participant_code: code, fund_asset: 'USDC.ETH', client_fund_id: 'order-new' },
    })
  ).message.deposit_address;
  const event = await recordDeposit(svc, {
    deposit_address: address,
    quantity: '10',
    transaction_id: txId(),
  });
  assert.equal(event.reference_id, 'order-new');

  clock.advance(CLIENT_TOKEN_LIFETIME_MS + CLIENT_TOKEN_RETENTION_MS + 60_000);
  assert.equal(await funding().purgeExpiredTokens(), 2);
  assert.equal(await funding().purgeExpiredTokens(), 0);
});

test('a purged token revoked again answers 204 to its platform, 400 to another; verifying it says expired', async () => {
  const { code } = await newAccountHolder(svc, owner.platform.platform_code);
  const { token } = await clientToken(owner.client, { participant_code: code });
  clock.advance(CLIENT_TOKEN_LIFETIME_MS + CLIENT_TOKEN_RETENTION_MS + 60_000);
  assert.ok((await funding().purgeExpiredTokens()) >= 1);
  assert.equal((await tokenIds()).has(jtiOf(token)), false);

  assert.equal((await owner.client.send('POST', '/revoke_auth_token', { body: { token } })).status, 204);
  const refused = await other.client.send<{ errors: string[] }>('POST', '/revoke_auth_token', {
    body: { token },
  });
  assert.equal(refused.status, 400);
  assert.deepEqual(refused.body.errors, ['token: is not a token issued by this service']);
  await assert.rejects(funding().verifyClientToken(token), /token: expired/);
});

test('the purge waits for no row: a session or a token another transaction holds is left for the next run', async () => {
  // Review: a deposit locks the participant's latest session, then the older unreported ones; the purge, waiting for
  // one of them while holding others, deadlocked with it.
  const { code } = await newAccountHolder(svc, owner.platform.platform_code);
  const sessionHeld = await clientToken(owner.client, { participant_code: code });
  const tokenHeld = await clientToken(owner.client, { participant_code: code, permissions: ['crypto-pay'] });
  const free = await clientToken(owner.client, { participant_code: code });
  clock.advance(CLIENT_TOKEN_LIFETIME_MS + CLIENT_TOKEN_RETENTION_MS + 60_000);
  const holder = new pg.Client({ connectionString: svc.database.url });
  await holder.connect();
  try {
    await holder.query('begin');
    await holder.query('select 1 from funding_sessions where session_id = $1 for share', [
      sessionHeld.deposit_intent_id,
    ]);
    await holder.query('select 1 from client_auth_tokens where jti = $1 for update', [
      jtiOf(tokenHeld.token),
    ]);
    // Run while the holder holds them: it would wait for ever if it waited at all.
    assert.equal(await funding().purgeExpiredTokens(), 1);
    const left = await tokenIds();
    assert.equal(left.has(jtiOf(free.token)), false);
    assert.ok(left.has(jtiOf(sessionHeld.token)), 'the token whose session is held stays');
    assert.ok(left.has(jtiOf(tokenHeld.token)), 'the token held stays');
    const session = await db()
      .selectFrom('funding_sessions')
      .select('token_jti')
      .where('session_id', '=', sessionHeld.deposit_intent_id!)
      .executeTakeFirstOrThrow();
    assert.equal(session.token_jti, jtiOf(sessionHeld.token));
    await holder.query('commit');
  } finally {
    await holder.end();
  }
  assert.equal(await funding().purgeExpiredTokens(), 2);
  const left = await tokenIds();
  for (const purged of [sessionHeld, tokenHeld]) assert.equal(left.has(jtiOf(purged.token)), false);
});

test('more than one batch is purged in one run', async () => {
  const { code } = await newAccountHolder(svc, owner.platform.platform_code);
  // Written directly: 6,000 tokens through the API would take the test a minute.
  const expired = new Date(clock.now() - CLIENT_TOKEN_RETENTION_MS - 60_000);
  await sql`insert into client_auth_tokens (jti, platform_code, participant_code, permissions, issued_at, expires_at)
      select gen_random_uuid(), ${owner.platform.platform_code}, ${code}, array['crypto-pay'],
        ${new Date(expired.getTime() - CLIENT_TOKEN_LIFETIME_MS)}, ${expired}
      from generate_series(1, 6000)`.execute(db());
  assert.equal(await funding().purgeExpiredTokens(), 6_000);
});

test('the purge is an hourly cron item of the worker, run serially, and its task is in the task list', () => {
  const item = cronItems.find((c) => c.task === PURGE_TOKENS_TASK);
  assert.ok(item, 'no cron item for the purge');
  assert.equal(item.match, '23 * * * *');
  assert.equal(item.options?.queueName, PURGE_TOKENS_TASK);
  assert.equal(parseCronItems(cronItems).length, cronItems.length);
  assert.equal(typeof buildTaskList(svc.runtime.appDeps!.services)[PURGE_TOKENS_TASK], 'function');
});
