import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, test } from 'node:test';
import { usCustomer } from '../helpers/onboarding-fixtures.ts';
import { startTestService, type PlatformFixture, type TestService } from '../helpers/test-service.ts';
import { DATA_USED_WITH_DIFFERENT_REQUEST_ID, EMAIL_ALREADY_EXISTS } from '../../src/contract/wire-values.ts';

/**
 * Issue 8 point 3 (wire-contract §7): concurrent identical requests create exactly one participant. Every
 * other answer is the replay, a 400 of spec 7.3, or a retryable 409/503; never a second participant and
 * never a 500. The requests go over real sockets to the real service on PostgreSQL.
 */
const CONCURRENCY = 50;

let svc: TestService;
let a: PlatformFixture;

before(async () => {
  svc = await startTestService();
  a = await svc.newPlatform();
});
after(() => svc?.close());

type Answer = { status: number; body: { message?: { participant_code?: string }; errors?: string[] } };

function burst(bodies: unknown[], requestId?: string): Promise<Answer[]> {
  return Promise.all(
    bodies.map((body) =>
      a.client.send<Answer['body']>('POST', '/participants/customers/new', {
        body,
        headers: requestId === undefined ? {} : { 'X-REQUEST-ID': requestId },
      }),
    ),
  );
}

async function store(email: string) {
  const db = svc.runtime.store.db;
  const participants = await db
    .selectFrom('participants')
    .select('participant_code')
    .where('platform_code', '=', a.platform.platform_code)
    .where('email', '=', email)
    .execute();
  const codes = participants.map((p) => p.participant_code);
  const submissions = codes.length
    ? await db.selectFrom('customer_submissions').selectAll().where('participant_code', 'in', codes).execute()
    : [];
  const notifications = codes.length
    ? await db
        .selectFrom('webhook_notifications')
        .select('notification_id')
        .where(
          'resource_key',
          'in',
          codes.map((c) => `participant:${c}`),
        )
        .execute()
    : [];
  return { codes, submissions: submissions.length, notifications: notifications.length };
}

const retryable = (answer: Answer) => answer.status === 409 || answer.status === 503;

test(`${CONCURRENCY} concurrent identical requests with one X-REQUEST-ID: one participant, every other answer the replay`, async () => {
  const body = usCustomer();
  const answers = await burst(
    Array.from({ length: CONCURRENCY }, () => body),
    randomUUID(),
  );

  const { codes, submissions, notifications } = await store(String(body.email));
  assert.equal(codes.length, 1, 'exactly one participant');
  assert.equal(submissions, 1);
  assert.equal(notifications, 1, 'one participant_status_changed');
  for (const answer of answers) {
    assert.ok(
      answer.status === 201 || retryable(answer),
      `unexpected ${answer.status} ${JSON.stringify(answer.body)}`,
    );
    if (answer.status === 201) assert.equal(answer.body.message?.participant_code, codes[0]);
  }
  assert.ok(answers.filter((x) => x.status === 201).length >= 1);
});

test(`${CONCURRENCY} concurrent identical requests without X-REQUEST-ID: one 201, the others 400 requestID`, async () => {
  const body = usCustomer();
  const answers = await burst(Array.from({ length: CONCURRENCY }, () => body));

  const { codes, submissions, notifications } = await store(String(body.email));
  assert.equal(codes.length, 1, 'exactly one participant');
  assert.equal(submissions, 1);
  assert.equal(notifications, 1);
  const created = answers.filter((x) => x.status === 201);
  assert.equal(created.length, 1, 'one creation answer');
  assert.equal(created[0]!.body.message?.participant_code, codes[0]);
  for (const answer of answers) {
    if (answer.status === 201 || retryable(answer)) continue;
    assert.equal(answer.status, 400, JSON.stringify(answer.body));
    assert.deepEqual(answer.body.errors, [DATA_USED_WITH_DIFFERENT_REQUEST_ID]);
  }
});

test('concurrent different payloads for one email: one participant, the others 400 email exists', async () => {
  const email = String(usCustomer().email);
  const bodies = Array.from({ length: 20 }, (_, i) => usCustomer({ email, first_name: `Ada${i}` }));
  const answers = await burst(bodies);
  const { codes } = await store(email);
  assert.equal(codes.length, 1);
  assert.equal(answers.filter((x) => x.status === 201).length, 1);
  for (const answer of answers) {
    if (answer.status === 201 || retryable(answer)) continue;
    assert.equal(answer.status, 400);
    assert.deepEqual(answer.body.errors, [EMAIL_ALREADY_EXISTS]);
  }
});

test('concurrent different customers under one X-REQUEST-ID: one is created, the others 400 requestID', async () => {
  const requestId = randomUUID();
  const bodies = Array.from({ length: 20 }, () => usCustomer());
  const answers = await burst(bodies, requestId);
  const created = await Promise.all(bodies.map((body) => store(String(body.email))));
  assert.equal(
    created.reduce((n, s) => n + s.codes.length, 0),
    1,
    'one customer under that id',
  );
  assert.equal(answers.filter((x) => x.status === 201).length, 1);
  for (const answer of answers) {
    if (answer.status === 201 || retryable(answer)) continue;
    assert.equal(answer.status, 400);
    assert.deepEqual(answer.body.errors, [DATA_USED_WITH_DIFFERENT_REQUEST_ID]);
  }
});
