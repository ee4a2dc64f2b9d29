import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, test } from 'node:test';
import {
  DATA_USED_WITH_DIFFERENT_REQUEST_ID,
  EMAIL_ALREADY_EXISTS,
  ParticipantsResource,
  SvcInvalidRequestError,
  SvcNotFoundError,
  SvcPermissionError,
  type PostCustomerBody,
} from '../../src/sdk/index.ts';
import { uniqueEmail, usCustomer } from '../helpers/onboarding-fixtures.ts';
import { startTestService, type PlatformFixture, type TestService } from '../helpers/test-service.ts';

/** The SDK's participants resource against the real server: one method per endpoint, typed, errors by family. */
let svc: TestService;
let a: PlatformFixture;
let b: PlatformFixture;
let participants: ParticipantsResource;

before(async () => {
  svc = await startTestService();
  a = await svc.newPlatform();
  b = await svc.newPlatform();
  participants = new ParticipantsResource(a.client);
});
after(() => svc?.close());

test('createCustomer: 201 unwrapped; the same payload and requestId returns the original answer', async () => {
  const body = usCustomer() as PostCustomerBody;
  const requestId = randomUUID();
  const created = await participants.createCustomer(body, { requestId });
  assert.equal(created.outcome, 'created');
  assert.ok(created.outcome === 'created');
  assert.match(created.participant_code, /^[A-Z0-9]{6}$/);
  assert.equal(created.customer.participant_code, created.participant_code);
  assert.equal(created.customer.platform_code, a.platform.platform_code);
  assert.equal(created.customer.status, 'approved');
  assert.equal(created.customer.email, body.email);
  assert.deepEqual(await participants.createCustomer(body, { requestId }), created);
});

test('createCustomer: spec 7.3 refusals resolve `exists` with the participant; format errors throw', async () => {
  const body = usCustomer() as PostCustomerBody;
  const first = await participants.createCustomer(body);
  const expected = { participant_code: first.participant_code, email: body.email };
  assert.deepEqual(await participants.createCustomer(body), {
    outcome: 'exists',
    participant_code: first.participant_code,
    participant: expected,
    conflict: DATA_USED_WITH_DIFFERENT_REQUEST_ID,
  });
  assert.deepEqual(await participants.createCustomer({ ...body, first_name: 'Augusta' }), {
    outcome: 'exists',
    participant_code: first.participant_code,
    participant: expected,
    conflict: EMAIL_ALREADY_EXISTS,
  });
  // A 7.3 refusal for an email nobody has (same request id, other payload): nothing to return, so it throws.
  const requestId = randomUUID();
  await participants.createCustomer(usCustomer() as PostCustomerBody, { requestId });
  await assert.rejects(
    participants.createCustomer(usCustomer() as PostCustomerBody, { requestId }),
    (error: unknown) =>
      error instanceof SvcInvalidRequestError && error.errors[0] === DATA_USED_WITH_DIFFERENT_REQUEST_ID,
  );
  await assert.rejects(
    participants.createCustomer({ ...body, email: 'nope' } as PostCustomerBody),
    (error: unknown) =>
      error instanceof SvcInvalidRequestError && error.errors.some((e) => e.startsWith('email: ')),
  );
});

test('getByEmail and list find the customer; unknown → SvcNotFoundError; another platform’s → SvcPermissionError', async () => {
  const body = usCustomer() as PostCustomerBody;
  const created = await participants.createCustomer(body);
  assert.deepEqual(await participants.getByEmail(body.email), {
    participant_code: created.participant_code,
    email: body.email,
  });
  const page = await participants.list({ participant_code: created.participant_code });
  assert.equal(page.count, 1);
  assert.equal(page.message[0]!.participant_code, created.participant_code);
  await assert.rejects(participants.getByEmail(uniqueEmail('nobody')), SvcNotFoundError);
  await assert.rejects(new ParticipantsResource(b.client).getByEmail(body.email), SvcPermissionError);
});
