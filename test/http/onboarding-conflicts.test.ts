import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { usCustomer, uniqueEmail } from '../helpers/onboarding-fixtures.ts';
import { startTestService, type PlatformFixture, type TestService } from '../helpers/test-service.ts';
import { assertVendorSchema } from '../helpers/vendor-schema.ts';
import { DATA_USED_WITH_DIFFERENT_REQUEST_ID, EMAIL_ALREADY_EXISTS } from '../../src/contract/wire-values.ts';

/**
 * Spec 7.3 exactly, per platform (issue 8 point 2; wire-contract §7, §9): the X-REQUEST-ID rule first (an
 * absent id counts as a value of its own), then the email rule; the same payload is the same JSON value;
 * the same payload with the same X-REQUEST-ID gets the original 201 again.
 */
let svc: TestService;
let a: PlatformFixture;
let b: PlatformFixture;

before(async () => {
  svc = await startTestService();
  a = await svc.newPlatform();
  b = await svc.newPlatform();
});
after(() => svc?.close());

type Answer = { status: number; body: { message?: Record<string, unknown>; errors?: string[] } };

function create(fixture: PlatformFixture, body: unknown, requestId?: string): Promise<Answer> {
  return fixture.client.send('POST', '/participants/customers/new', {
    body,
    headers: requestId === undefined ? {} : { 'X-REQUEST-ID': requestId },
  });
}

function assert400(answer: Answer, message: string) {
  assert.equal(answer.status, 400, JSON.stringify(answer.body));
  assertVendorSchema(answer.body, 'Code400');
  assert.deepEqual(answer.body.errors, [message]);
}

async function customersWithEmail(platformCode: string, email: string): Promise<string[]> {
  const rows = await svc.runtime.store.db
    .selectFrom('participants')
    .select('participant_code')
    .where('platform_code', '=', platformCode)
    .where('email', '=', email)
    .execute();
  return rows.map((r) => r.participant_code);
}

async function notificationCount(participantCode: string): Promise<number> {
  const rows = await svc.runtime.store.db
    .selectFrom('webhook_notifications')
    .select('notification_id')
    .where('resource_key', '=', `participant:${participantCode}`)
    .execute();
  return rows.length;
}

describe('spec 7.3 table', () => {
  test('different data for an email that already exists → 400 "Participant already exists with this email for this platform"', async () => {
    const first = usCustomer();
    assert.equal((await create(a, first)).status, 201);
    for (const changed of [
      { first_name: 'Augusta' },
      { date_of_birth: '1986-09-02' },
      { tax_id: '234-56-7890' },
      { email: String(first.email).toUpperCase() }, // the same email, whatever its case
    ]) {
      assert400(await create(a, { ...first, ...changed }), EMAIL_ALREADY_EXISTS);
    }
    // …also when both carry ids, as long as the ids differ (the X-REQUEST-ID rule does not apply).
    const withId = usCustomer();
    assert.equal((await create(a, withId, randomUUID())).status, 201);
    assert400(await create(a, { ...withId, last_name: 'Byron' }, randomUUID()), EMAIL_ALREADY_EXISTS);
    assert400(await create(a, { ...withId, last_name: 'Byron' }), EMAIL_ALREADY_EXISTS);
    // …and for a participant the operator onboarded.
    const operatorMade = await svc.newParticipant(a.platform.platform_code);
    assert400(await create(a, usCustomer({ email: operatorMade.email })), EMAIL_ALREADY_EXISTS);
    assert.equal((await customersWithEmail(a.platform.platform_code, String(first.email))).length, 1);
  });

  test('same payload, no X-REQUEST-ID on either → 400 "Participant data already used with different requestID"', async () => {
    const body = usCustomer();
    const original = await create(a, body);
    assert.equal(original.status, 201);
    assert400(await create(a, body), DATA_USED_WITH_DIFFERENT_REQUEST_ID);
    assert400(await create(a, body), DATA_USED_WITH_DIFFERENT_REQUEST_ID);
    assert.deepEqual(await customersWithEmail(a.platform.platform_code, String(body.email)), [
      original.body.message!.participant_code,
    ]);
  });

  test('same payload, a different X-REQUEST-ID → 400 requestID (and an absent id differs from any id)', async () => {
    const body = usCustomer();
    assert.equal((await create(a, body, 'req-1')).status, 201);
    assert400(await create(a, body, 'req-2'), DATA_USED_WITH_DIFFERENT_REQUEST_ID);
    assert400(await create(a, body), DATA_USED_WITH_DIFFERENT_REQUEST_ID); // some id, then none

    const noneFirst = usCustomer();
    assert.equal((await create(a, noneFirst)).status, 201);
    assert400(await create(a, noneFirst, randomUUID()), DATA_USED_WITH_DIFFERENT_REQUEST_ID); // none, then some
  });

  test('different payload, the same X-REQUEST-ID → 400 requestID, checked before the email rule', async () => {
    const requestId = randomUUID();
    const body = usCustomer();
    assert.equal((await create(a, body, requestId)).status, 201);
    // Same email, other data: both rules would apply; the X-REQUEST-ID rule wins (wire-contract §9).
    assert400(
      await create(a, { ...body, first_name: 'Augusta' }, requestId),
      DATA_USED_WITH_DIFFERENT_REQUEST_ID,
    );
    // Another customer altogether under a used id: refused, and not created.
    const other = usCustomer();
    assert400(await create(a, other, requestId), DATA_USED_WITH_DIFFERENT_REQUEST_ID);
    assert.deepEqual(await customersWithEmail(a.platform.platform_code, String(other.email)), []);
  });

  test('same payload, the same X-REQUEST-ID → the original 201 response again, same participant', async () => {
    const requestId = randomUUID();
    const body = usCustomer();
    const original = await create(a, body, requestId);
    assert.equal(original.status, 201);
    const code = String(original.body.message!.participant_code);

    // The status changes afterwards; a repeat still gets the original answer, not a new one.
    await svc.admin.patch(`/participants/${code}`, { status: 'locked' });
    for (let i = 0; i < 3; i++) {
      const again = await create(a, body, requestId);
      assert.equal(again.status, 201);
      assertVendorSchema(again.body, 'PostCustomersResponse');
      assert.equal(JSON.stringify(again.body), JSON.stringify(original.body));
    }
    assert.deepEqual(await customersWithEmail(a.platform.platform_code, String(body.email)), [code]);
    assert.equal(await notificationCount(code), 2, 'creation and the lock; a replay records nothing');
  });
});

describe('"same payload" is the same JSON value', () => {
  test('key order and white space do not make a different payload', async () => {
    const requestId = randomUUID();
    const body = usCustomer({ metadata: { b: 1, a: [1, { y: true, x: null }] } });
    const original = await create(a, JSON.stringify(body), requestId);
    assert.equal(original.status, 201);

    const reordered = Object.fromEntries(Object.entries(body).reverse());
    (reordered as { metadata: unknown }).metadata = { a: [1, { x: null, y: true }], b: 1 };
    const spaced = JSON.stringify(reordered, null, 3).replaceAll(':', ' :\t');
    const replay = await create(a, spaced, requestId);
    assert.equal(replay.status, 201, JSON.stringify(replay.body));
    assert.equal(replay.body.message!.participant_code, original.body.message!.participant_code);
    // Without the id the same value is "data already used", not "a different payload for this email".
    assert400(await create(a, spaced), DATA_USED_WITH_DIFFERENT_REQUEST_ID);
  });

  test('a changed value, even deep inside, is a different payload', async () => {
    const requestId = randomUUID();
    const body = usCustomer({ metadata: { tags: ['a', 'b'] } });
    assert.equal((await create(a, body, requestId)).status, 201);
    assert400(
      await create(a, { ...body, metadata: { tags: ['b', 'a'] } }, requestId),
      DATA_USED_WITH_DIFFERENT_REQUEST_ID,
    );
    assert400(await create(a, { ...body, metadata: { tags: ['b', 'a'] } }), EMAIL_ALREADY_EXISTS);
  });
});

describe('per platform', () => {
  test('the same email on another platform is a different participant', async () => {
    const body = usCustomer();
    const onA = await create(a, body);
    const onB = await create(b, body);
    assert.equal(onA.status, 201);
    assert.equal(onB.status, 201);
    assert.notEqual(onA.body.message!.participant_code, onB.body.message!.participant_code);
    assert.equal(onB.body.message!.platform_code, b.platform.platform_code);
  });

  test('X-REQUEST-IDs and payloads are remembered per platform', async () => {
    const requestId = randomUUID();
    assert.equal((await create(a, usCustomer(), requestId)).status, 201);
    const onB = await create(b, usCustomer({ email: uniqueEmail() }), requestId);
    assert.equal(onB.status, 201, JSON.stringify(onB.body));

    const shared = usCustomer();
    const sharedId = randomUUID();
    assert.equal((await create(a, shared, sharedId)).status, 201);
    const sameOnB = await create(b, shared, sharedId);
    assert.equal(sameOnB.status, 201);
    assert.equal(sameOnB.body.message!.platform_code, b.platform.platform_code, "not A's replay");
  });
});
