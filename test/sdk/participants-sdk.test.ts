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
  assert.match(created.participant_code, /^[A-Z0-9]{6}$/);
  assert.equal(created.platform_code, a.platform.platform_code);
  assert.equal(created.status, 'approved');
  assert.equal(created.email, body.email);
  assert.deepEqual(await participants.createCustomer(body, { requestId }), created);
});

test('createCustomer: spec 7.3 refusals and format errors are SvcInvalidRequestError with the messages', async () => {
  const body = usCustomer() as PostCustomerBody;
  await participants.createCustomer(body);
  await assert.rejects(participants.createCustomer(body), (error: unknown) => {
    assert.ok(error instanceof SvcInvalidRequestError);
    assert.deepEqual(error.errors, [DATA_USED_WITH_DIFFERENT_REQUEST_ID]);
    return true;
  });
  await assert.rejects(
    participants.createCustomer({ ...body, first_name: 'Augusta' }),
    (error: unknown) => error instanceof SvcInvalidRequestError && error.errors[0] === EMAIL_ALREADY_EXISTS,
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
