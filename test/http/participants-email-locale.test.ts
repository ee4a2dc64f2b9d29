import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { Participant } from '../../src/contract/admin.schemas.ts';
import { EMAIL_ALREADY_EXISTS } from '../../src/contract/wire-values.ts';
import { icuLocaleUnsupported } from '../helpers/database.ts';
import { usCustomer } from '../helpers/onboarding-fixtures.ts';
import { startTestService, type PlatformFixture, type TestService } from '../helpers/test-service.ts';

/**
 * An email is one identity whatever its letter case, on a database of any locale (migration 0042). On one created
 * Turkish, PostgreSQL's lower('I') is 'ı': no look-up found a customer whose email has a capital I, and the same
 * email in other letters was onboarded again as a new customer, 201 (probe).
 */
const unsupported = await icuLocaleUnsupported();
const SKIP = unsupported ? `no Turkish-locale database: ${unsupported}` : false;

let svc: TestService;
let a: PlatformFixture;
let b: PlatformFixture;

type Body = { message?: unknown; errors?: string[] };

describe('emails on a database whose locale is Turkish (ICU tr-TR)', { skip: SKIP }, () => {
  before(async () => {
    svc = await startTestService({ icuLocale: 'tr-TR' });
    a = await svc.newPlatform();
    b = await svc.newPlatform();
  });
  after(() => svc?.close());

  const onboard = (fixture: PlatformFixture, body: Record<string, unknown>) =>
    fixture.client.send<Body & { message: { participant_code: string } }>(
      'POST',
      '/participants/customers/new',
      { body },
    );
  const byEmail = (fixture: PlatformFixture, email: string) =>
    fixture.client.send<Body>('GET', `/participants/${encodeURIComponent(email)}`);

  test('the database lowers I to ı, the case the tests below are about', async () => {
    const { rows } = await svc.runtime.store.pool.query<{ lowered: string }>(`select lower('I') as lowered`);
    assert.equal(rows[0]!.lowered, 'ı');
  });

  test('a customer whose email has a capital I is found in any letter case, and not onboarded twice', async () => {
    const email = `Ivan.Ilic.${Date.now()}@Example.com`;
    const created = await onboard(a, usCustomer({ email }));
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const code = created.body.message.participant_code;

    for (const asked of [email, email.toLowerCase(), email.toUpperCase()]) {
      const found = await byEmail(a, asked);
      assert.equal(found.status, 200, `${asked}: ${JSON.stringify(found.body)}`);
      assert.deepEqual(found.body.message, { participant_code: code, email });
      // Another platform's customer: 403, not "none" (wire-contract §9).
      assert.equal((await byEmail(b, asked)).status, 403, asked);
    }
    const listed = await a.client.send<Body & { message: Array<{ participant_code: string }> }>(
      'GET',
      '/participants',
      { query: { email: email.toLowerCase() } },
    );
    assert.deepEqual(
      listed.body.message.map((p) => p.participant_code),
      [code],
    );
    const everywhere = await svc.admin.get<Participant[]>(
      `/participants?email=${encodeURIComponent(email.toLowerCase())}`,
    );
    assert.deepEqual(
      everywhere.map((p) => p.participant_code),
      [code],
    );

    // Other data under the email in other letters: spec 7.3's "already exists", not a second customer.
    const again = await onboard(a, usCustomer({ email: email.toLowerCase(), first_name: 'Other' }));
    assert.equal(again.status, 400, JSON.stringify(again.body));
    assert.deepEqual(again.body.errors, [EMAIL_ALREADY_EXISTS]);
    const rows = await svc.runtime.store.pool.query(
      `select participant_code from participants where lower(email collate "C") = $1`,
      [email.toLowerCase()],
    );
    assert.equal(rows.rowCount, 1);
  });

  test('the operator API refuses the email in other letters with 409, past the look-ups, by the unique index', async () => {
    const email = `Irma.${Date.now()}@example.com`;
    const created = await onboard(a, usCustomer({ email }));
    assert.equal(created.status, 201, JSON.stringify(created.body));
    const again = await svc.operatorCall('POST', '/participants', {
      platform_code: a.platform.platform_code,
      email: email.toLowerCase(),
      first_name: 'Irma',
      last_name: 'Again',
    });
    assert.equal(again.status, 409, again.text);
    assert.match(again.text, /already exists for this platform/);
  });
});
