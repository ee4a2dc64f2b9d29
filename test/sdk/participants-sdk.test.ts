import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, test } from 'node:test';
import {
  createClient,
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

test('createCustomer without a requestId: a first attempt done only after the look-up checked is `created`, not `exists`', async () => {
  // The race of a timeout: the first POST reaches the server late, after the SDK's look-up found nothing, and
  // the SDK resends. The resend carries the first's X-REQUEST-ID (the SDK's own when the caller gave none), so
  // the server answers it as a replay; without one it was a spec 7.3 refusal and the SDK said `exists`.
  const body = usCustomer() as PostCustomerBody;
  let heldFirst: (() => Promise<unknown>) | null = null;
  const requestIds: Array<string | null> = [];
  const client = createClient({
    baseUrl: svc.url,
    apiKey: a.key.api_key,
    apiSecret: a.key.api_secret,
    passphrase: a.key.passphrase,
    retry: { sleep: async () => {} },
    fetch: async (input, init) => {
      if (init?.method === 'POST') {
        requestIds.push(new Headers(init.headers).get('x-request-id'));
        if (requestIds.length === 1) {
          // Sent, but it arrives only later; the SDK sees no answer.
          heldFirst = () => fetch(input, init).then((res) => res.text());
          throw new TypeError('fetch failed');
        }
        await heldFirst!(); // the first lands (and commits) before the resend
      }
      return fetch(input, init);
    },
  });
  const result = await client.participants.createCustomer(body);
  assert.equal(result.outcome, 'created', JSON.stringify(result));
  assert.equal(requestIds.length, 2);
  assert.ok(requestIds[0], 'an X-REQUEST-ID is sent');
  assert.equal(requestIds[1], requestIds[0], 'the resend is the same request');
  // Two calls are two requests: the same payload again (another id) is refused as spec 7.3 says.
  const again = await client.participants.createCustomer(body);
  assert.equal(again.outcome, 'exists');
  assert.equal(again.participant_code, result.participant_code);
});

test('createCustomer sends one X-REQUEST-ID: the caller’s among its headers, or requestId over it', async () => {
  const sent: Array<string | null> = [];
  const client = createClient({
    baseUrl: svc.url,
    apiKey: a.key.api_key,
    apiSecret: a.key.api_secret,
    passphrase: a.key.passphrase,
    fetch: async (input, init) => {
      if (init?.method === 'POST') sent.push(new Headers(init.headers).get('x-request-id'));
      return fetch(input, init);
    },
  });
  const mine = `mine-${randomUUID()}`;
  const body = usCustomer() as PostCustomerBody;
  const created = await client.participants.createCustomer(body, { headers: { 'X-Request-ID': mine } });
  assert.equal(created.outcome, 'created');
  // Given both ways, the option wins and is sent once (fetch joins two headers of one name as "a, b").
  const option = `option-${randomUUID()}`;
  await client.participants.createCustomer(usCustomer() as PostCustomerBody, {
    requestId: option,
    headers: { 'x-request-id': `header-${randomUUID()}` },
  });
  assert.deepEqual(sent, [mine, option]);
  // The server keyed the creation on the caller's id: the same payload and id is a replay of it.
  assert.deepEqual(await client.participants.createCustomer(body, { requestId: mine }), created);
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
