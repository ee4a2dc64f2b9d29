import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, describe, test } from 'node:test';
import { euCustomer, uniqueEmail, usCustomer } from '../helpers/onboarding-fixtures.ts';
import { assertOtherPlatformForbidden } from '../helpers/ownership.ts';
import { startTestService, type PlatformFixture, type TestService } from '../helpers/test-service.ts';
import { assertVendorSchema } from '../helpers/vendor-schema.ts';

/**
 * The look-ups that validate a creation (spec 7.2 last row; issue 8 points 4 and 5): GET /participants/{email}
 * and GET /participants in the vendor's shapes, scoped to the calling platform, with the cross-platform 403
 * of wire-contract §9; and a creation answered 502 by the cert simulator after it committed.
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

type Body = { message?: unknown; errors?: string[]; page?: number; total_pages?: number; count?: number };

async function createCustomer(fixture: PlatformFixture, body: Record<string, unknown>) {
  const res = await fixture.client.send<{ message: { participant_code: string } }>(
    'POST',
    '/participants/customers/new',
    { body },
  );
  assert.equal(res.status, 201, JSON.stringify(res.body));
  return res.body.message.participant_code;
}

const byEmail = (fixture: PlatformFixture, email: string) =>
  fixture.client.send<Body>('GET', `/participants/${encodeURIComponent(email)}`);
const list = (fixture: PlatformFixture, query: Record<string, string | number> = {}) =>
  fixture.client.send<Body & { message: Array<Record<string, unknown>> }>('GET', '/participants', { query });

describe('GET /participants/{email}', () => {
  test("the platform's participant: {participant_code, email} in the vendor shape, whatever the case", async () => {
    const body = usCustomer();
    const code = await createCustomer(a, body);
    for (const email of [String(body.email), String(body.email).toUpperCase()]) {
      const res = await byEmail(a, email);
      assert.equal(res.status, 200, JSON.stringify(res.body));
      assertVendorSchema(res.body, 'GetParticipantByEmailResponse');
      assert.deepEqual(res.body.message, { participant_code: code, email: body.email });
    }
  });

  test('operator-onboarded participants are found too', async () => {
    const participant = await svc.newParticipant(a.platform.platform_code);
    const res = await byEmail(a, String(participant.email));
    assert.equal(res.status, 200);
    assert.deepEqual(res.body.message, {
      participant_code: participant.participant_code,
      email: participant.email,
    });
  });

  test('unknown → 404; not an email → 400', async () => {
    const missing = await byEmail(a, uniqueEmail('nobody'));
    assert.equal(missing.status, 404);
    assertVendorSchema(missing.body, 'Code404');
    const bad = await byEmail(a, 'not-an-email');
    assert.equal(bad.status, 400);
    assert.ok(
      bad.body.errors!.some((e) => e.startsWith('email: ')),
      String(bad.body.errors),
    );
  });

  test("another platform's participant → 403 (wire-contract §9)", async () => {
    const body = usCustomer();
    await createCustomer(a, body);
    const path = `/participants/${encodeURIComponent(String(body.email))}`;
    await assertOtherPlatformForbidden({ method: 'GET', path }, { owner: a.client, other: b.client });
    assertVendorSchema((await b.client.send('GET', path)).body, 'Code403');
  });

  test('an email both platforms onboarded: each sees its own participant', async () => {
    const body = usCustomer();
    const onA = await createCustomer(a, body);
    const onB = await createCustomer(b, body);
    assert.deepEqual((await byEmail(a, String(body.email))).body.message, {
      participant_code: onA,
      email: body.email,
    });
    assert.deepEqual((await byEmail(b, String(body.email))).body.message, {
      participant_code: onB,
      email: body.email,
    });
  });
});

describe('GET /participants', () => {
  let platform: PlatformFixture;
  const codes: string[] = [];
  const bodies: Array<Record<string, unknown>> = [];

  before(async () => {
    platform = await svc.newPlatform();
    for (let i = 0; i < 5; i++) {
      const body = i === 4 ? euCustomer() : usCustomer({ kyc: i % 2 === 0 ? 'pass' : 'fail' });
      bodies.push(body);
      codes.push(await createCustomer(platform, body));
    }
    // Another platform's customers never show up.
    await createCustomer(b, usCustomer());
  });

  test("the platform's customers, oldest first, as ParticipantEntity with pagination", async () => {
    const res = await list(platform);
    assert.equal(res.status, 200);
    assertVendorSchema(res.body, 'GetParticipantsResponse');
    assert.deepEqual(
      res.body.message.map((p) => p.participant_code),
      codes,
    );
    assert.equal(res.body.page, 1);
    assert.equal(res.body.total_pages, 1);
    assert.equal(res.body.count, 5);
    const first = res.body.message[0]!;
    assert.equal(first.participant_name, 'Ada Lovelace');
    assert.equal(first.email, bodies[0]!.email);
    assert.equal(first.status, 'approved');
    assert.equal(first.jurisdiction_code, 'US-IL');
    assert.deepEqual(first.limits, []);
    assert.match(String(first.updated_at), /^\d{13}$/);
    assert.equal(res.body.message[1]!.status, 'submitted');
  });

  test('filters: participant_code, email (any case) and status', async () => {
    const byCode = await list(platform, { participant_code: codes[2]! });
    assert.deepEqual(
      byCode.body.message.map((p) => p.participant_code),
      [codes[2]],
    );
    const byMail = await list(platform, { email: String(bodies[3]!.email).toUpperCase() });
    assert.deepEqual(
      byMail.body.message.map((p) => p.participant_code),
      [codes[3]],
    );
    // An email of another form than a participant's is refused, as by GET /participants/{email}: case-folded, a
    // KELVIN SIGN (U+212A) for the "k" found a look-alike's participant (probe).
    const stored = String(bodies[3]!.email);
    const lookAlike = await list(platform, { email: stored.replace(/^./, '\u212a') });
    assert.equal(lookAlike.status, 400);
    assert.deepEqual((lookAlike.body as unknown as { errors: string[] }).errors, [
      'email: must match format "email"',
    ]);
    const submitted = await list(platform, { status: 'submitted' });
    assert.deepEqual(
      submitted.body.message.map((p) => p.participant_code),
      [codes[1], codes[3]],
    );
    const none = await list(platform, { status: 'pending_approval' });
    assert.deepEqual(none.body.message, []);
    assert.equal(none.body.total_pages, 0);
    assertVendorSchema(none.body, 'GetParticipantsResponse');
  });

  test('reason_code appears once the operator sets one', async () => {
    await svc.admin.patch(`/participants/${codes[0]}`, { status: 'locked', reason_code: 'compliance_issue' });
    const res = await list(platform, { participant_code: codes[0]! });
    assert.equal(res.body.message[0]!.status, 'locked');
    assert.equal(res.body.message[0]!.reason_code, 'compliance_issue');
    assertVendorSchema(res.body, 'GetParticipantsResponse');
    await svc.admin.patch(`/participants/${codes[0]}`, { status: 'approved' });
  });

  test('minors=true keeps the customers under 18; entity_type other than individual matches none', async () => {
    const own = await svc.newPlatform();
    const year = new Date().getUTCFullYear();
    const adult = await createCustomer(own, usCustomer({ date_of_birth: `${year - 30}-01-15` }));
    const minor = await createCustomer(own, usCustomer({ date_of_birth: `${year - 10}-01-15` }));
    const all = await list(own, { minors: 'false', entity_type: 'individual' });
    assert.deepEqual(
      all.body.message.map((p) => p.participant_code),
      [adult, minor],
    );
    const minors = await list(own, { minors: 'true' });
    assert.deepEqual(
      minors.body.message.map((p) => p.participant_code),
      [minor],
    );
    assertVendorSchema(minors.body, 'GetParticipantsResponse');
    const companies = await list(own, { entity_type: 'corporation' });
    assert.deepEqual(companies.body.message, []);
  });

  test('pages: page and page_size, total_pages and count', async () => {
    const seen: string[] = [];
    for (let page = 1; page <= 3; page++) {
      const res = await list(platform, { page, page_size: 2 });
      assert.equal(res.status, 200);
      assertVendorSchema(res.body, 'GetParticipantsResponse');
      assert.equal(res.body.page, page);
      assert.equal(res.body.total_pages, 3);
      assert.equal(res.body.count, 5);
      seen.push(...res.body.message.map((p) => String(p.participant_code)));
    }
    assert.deepEqual(seen, codes);
    const past = await list(platform, { page: 4, page_size: 2 });
    assert.deepEqual(past.body.message, []);
  });

  test("a parameter the vendor does not have → 400 naming it; relationship_type is the vendor's and narrows nothing", async () => {
    const misspelt = await list(platform, { emial: 'x@example.com' });
    assert.equal(misspelt.status, 400);
    assert.deepEqual(misspelt.body.errors, ['emial: is not allowed']);
    const all = await list(platform, {});
    const withRelationship = await list(platform, { relationship_type: 'customer' });
    assert.equal(withRelationship.status, 200);
    assert.deepEqual(withRelationship.body, all.body);
  });

  test('bad query values → 400 naming them', async () => {
    const res = await list(platform, {
      participant_code: 'abc',
      status: 'sleeping',
      page: 0,
      page_size: 101,
    });
    assert.equal(res.status, 400);
    for (const field of ['participant_code', 'status', 'page', 'page_size']) {
      assert.ok(
        res.body.errors!.some((e) => e.startsWith(`querystring.${field}: `) || e.startsWith(`${field}: `)),
        `${field} in ${JSON.stringify(res.body.errors)}`,
      );
    }
  });

  test("a filter naming another platform's participant → 403, as the path would", async () => {
    const theirs = usCustomer();
    const theirCode = await createCustomer(b, theirs);
    await assertOtherPlatformForbidden(
      { method: 'GET', path: '/participants', options: { query: { participant_code: theirCode } } },
      { owner: b.client, other: platform.client },
    );
    await assertOtherPlatformForbidden(
      { method: 'GET', path: '/participants', options: { query: { email: String(theirs.email) } } },
      { owner: b.client, other: platform.client },
    );
    // Unknown everywhere: simply no match.
    const none = await list(platform, { participant_code: 'ZZZZZ9' });
    assert.equal(none.status, 200);
    assert.deepEqual(none.body.message, []);
  });
});

describe('a creation that committed but was answered 502 (cert simulator, error_502_after)', () => {
  test('the participant exists, the look-ups find it, and the repeat with the same X-REQUEST-ID is the replay', async () => {
    const body = usCustomer();
    const requestId = randomUUID();
    const res = await a.client.send('POST', '/participants/customers/new', {
      body,
      headers: { 'X-REQUEST-ID': requestId, 'X-Simulator-Scenario': 'error_502_after' },
    });
    assert.equal(res.status, 502);

    // spec 7.1/7.2: after a 502 the state is unknown; the look-up is the idempotence check.
    const found = await byEmail(a, String(body.email));
    assert.equal(found.status, 200);
    const code = (found.body.message as { participant_code: string }).participant_code;
    assert.match(code, /^[A-Z0-9]{6}$/);
    const listed = await list(a, { email: String(body.email) });
    assert.deepEqual(
      listed.body.message.map((p) => p.participant_code),
      [code],
    );

    const again = await a.client.send<{ message: { participant_code: string } }>(
      'POST',
      '/participants/customers/new',
      { body, headers: { 'X-REQUEST-ID': requestId } },
    );
    assert.equal(again.status, 201);
    assert.equal(again.body.message.participant_code, code);
  });
});
