import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { startTestService, type PlatformFixture, type TestService } from '../helpers/test-service.ts';
import { assertNoFieldsBeyondVendor, assertVendorSchema } from '../helpers/vendor-schema.ts';
import { Ajv } from 'ajv';
import { CreatedCustomer, REQUEST_ONLY_CUSTOMER_FIELDS } from '../../src/contract/participants.schemas.ts';
import { withFormats } from '../../src/contract/schema-formats.ts';
import {
  euCustomer,
  nonUsRelianceCustomer,
  partialCustomer,
  usCustomer,
  usRelianceCustomer,
} from '../helpers/onboarding-fixtures.ts';

/**
 * POST /participants/customers/new (spec 4.6; issue 8 point 1): the vendor's fields and formats, a 400 that
 * lists every bad field, 201 with a new 6-character code and the status, and the participant_status_changed
 * notification on creation and on every later status change.
 */
/** The route's 201 `message` as /docs/json documents it. */
const answerAsDocumented = withFormats(new Ajv({ allErrors: true, strict: false })).compile(CreatedCustomer);

let svc: TestService;
let a: PlatformFixture;

before(async () => {
  svc = await startTestService();
  a = await svc.newPlatform();
});
after(() => svc?.close());

const create = (body: unknown, headers: Record<string, string> = {}) =>
  a.client.send<{ message: Record<string, unknown>; errors?: string[] }>(
    'POST',
    '/participants/customers/new',
    { body, headers },
  );

async function participantNotifications(participantCode: string) {
  return svc.runtime.store.db
    .selectFrom('webhook_notifications')
    .select(['platform_code', 'payload_type', 'resource_key', 'payload'])
    .where('resource_key', '=', `participant:${participantCode}`)
    .orderBy('seq')
    .execute();
}

describe('creation', () => {
  test('201: the submitted customer with a new 6-character code, the platform and status approved', async () => {
    const body = usCustomer({ middle_name: 'King', phone_number: '15557778888', metadata: { crm_id: 42 } });
    const res = await create(body);
    assert.equal(res.status, 201, JSON.stringify(res.body));
    assertVendorSchema(res.body, 'PostCustomersResponse');
    const customer = res.body.message;
    assert.match(String(customer.participant_code), /^[A-Z0-9]{6}$/);
    assert.equal(customer.platform_code, a.platform.platform_code);
    assert.equal(customer.status, 'approved');
    for (const [field, value] of Object.entries(body)) assert.deepEqual(customer[field], value, field);

    const row = await svc.runtime.store.db
      .selectFrom('participants')
      .selectAll()
      .where('participant_code', '=', String(customer.participant_code))
      .executeTakeFirstOrThrow();
    assert.equal(row.platform_code, a.platform.platform_code);
    assert.equal(row.email, body.email);
    assert.equal(row.first_name, 'Ada');
    assert.equal(row.status, 'approved');
  });

  test('timestamps with a fraction of a millisecond, as the vendor types them (numbers): accepted and echoed', async () => {
    // What Python's `time.time() * 1000` gives; refused before as "must be an integer" (review).
    const at = Date.now() - 1_000.375;
    const body = usCustomer({ kyc_timestamp: at, sanction_screening_timestamp: at, signed_timestamp: at });
    const res = await create(body);
    assert.equal(res.status, 201, JSON.stringify(res.body));
    assertVendorSchema(res.body, 'PostCustomersResponse');
    assert.equal(res.body.message.kyc_timestamp, at);
  });

  test('proof_of_address_coordinates in degrees, minutes and seconds come back in decimal degrees', async () => {
    // vendor: "Accepts both Decimal Degrees (DD) and Degrees/Minutes/Seconds (DMS) formats. Values are returned in
    // DD format" (its example: N 51d 30.000000m 40.190000 is 51.511164). They were echoed as sent (probe).
    const dms = usCustomer({
      proof_of_address_coordinates: { latitude: 'N 51d 30.000000m 40.190000', longitude: 'W 0d 4m 59.94' },
    });
    const res = await create(dms, { 'X-REQUEST-ID': 'dms-once' });
    assert.equal(res.status, 201, JSON.stringify(res.body));
    assertVendorSchema(res.body, 'PostCustomersResponse');
    assert.deepEqual(res.body.message.proof_of_address_coordinates, {
      latitude: '51.511164',
      longitude: '-0.083317',
    });
    // The same request again (spec 7.3) is the same 201: the submission is identified by the body as sent.
    const again = await create(dms, { 'X-REQUEST-ID': 'dms-once' });
    assert.equal(again.status, 201, JSON.stringify(again.body));
    assert.deepEqual(again.body, res.body);
    const dd = await create(
      usCustomer({ proof_of_address_coordinates: { latitude: '-33.8688', longitude: '151.2093' } }),
    );
    assert.equal(dd.status, 201, JSON.stringify(dd.body));
    assert.deepEqual(dd.body.message.proof_of_address_coordinates, {
      latitude: '-33.8688',
      longitude: '151.2093',
    });
  });

  test('coordinates that name no place on the globe are a 400 naming each', async () => {
    const res = await create(
      usCustomer({ proof_of_address_coordinates: { latitude: 'E 10d 0m 0', longitude: '180.5' } }),
    );
    assert.equal(res.status, 400);
    assert.deepEqual(res.body.errors, [
      'proof_of_address_coordinates.latitude: takes N or S, not E',
      'proof_of_address_coordinates.longitude: must be between -180 and 180 degrees',
    ]);
  });

  test('status is submitted unless both KYC and sanctions screening passed', async () => {
    for (const [kyc, sanction_screening, expected] of [
      ['fail', 'pass', 'submitted'],
      ['pass', 'fail', 'submitted'],
      ['fail', 'fail', 'submitted'],
    ] as const) {
      const res = await create(usCustomer({ kyc, sanction_screening }));
      assert.equal(res.status, 201, JSON.stringify(res.body));
      assert.equal(res.body.message.status, expected, `${kyc}/${sanction_screening}`);
    }
  });

  test('every vendor variant is accepted: general, US reliance, non-US reliance, EU, partially onboarded', async () => {
    for (const [name, body] of [
      ['general', usCustomer()],
      ['US reliance (200-character address, zip)', usRelianceCustomer()],
      ['non-US reliance', nonUsRelianceCustomer()],
      ['EU', euCustomer()],
      ['partially onboarded', partialCustomer()],
    ] as const) {
      const res = await create(body);
      assert.equal(res.status, 201, `${name}: ${JSON.stringify(res.body)}`);
      assertVendorSchema(res.body, 'PostCustomersResponse');
      const echoed = Object.keys(body).filter(
        (k) => !(REQUEST_ONLY_CUSTOMER_FIELDS as readonly string[]).includes(k),
      );
      assert.deepEqual(
        Object.fromEntries(echoed.map((k) => [k, res.body.message[k]])),
        Object.fromEntries(echoed.map((k) => [k, (body as Record<string, unknown>)[k]])),
        `${name}: echoes what was submitted`,
      );
      assertNoFieldsBeyondVendor(res.body.message, 'PostCustomersResponse');
      // And the answer our own document gives for the route (probe: its 80- and 50-character addresses refused the
      // reliance track's 201).
      assert.ok(
        answerAsDocumented(res.body.message),
        `${name}: ${JSON.stringify(answerAsDocumented.errors)}`,
      );
    }
  });

  test("fields the vendor's answer does not have are accepted and not echoed, replayed answers included", async () => {
    // Probe: the 201 echoed them, and a client generated with strict models refused it.
    const body = usCustomer({
      gross_annual_income_amount: '25k_to_100k',
      tx_usd_equivalent_monthly_amount: '1000',
      platform_updated_at: Date.now() - 1_000,
    });
    for (const attempt of ['first', 'replay']) {
      const res = await create(body, { 'x-request-id': `echo-${body.email}` });
      assert.equal(res.status, 201, `${attempt}: ${JSON.stringify(res.body)}`);
      assertNoFieldsBeyondVendor(res.body.message, 'PostCustomersResponse');
      assert.equal(res.body.message.gross_annual_income_amount, undefined, attempt);
      assert.equal(res.body.message.email, body.email, attempt);
    }
  });

  test('creation records participant_status_changed in the same transaction', async () => {
    const res = await create(usCustomer({ kyc: 'fail' }));
    const code = String(res.body.message.participant_code);
    const notifications = await participantNotifications(code);
    assert.equal(notifications.length, 1);
    assert.equal(notifications[0]!.platform_code, a.platform.platform_code);
    assert.equal(notifications[0]!.payload_type, 'participant_status_changed');
    const payload = notifications[0]!.payload as Record<string, unknown>;
    assert.equal(payload.participant_code, code);
    assert.equal(payload.participant_status, 'submitted');
    assert.ok(Number.isInteger(payload.timestamp));
    // The creation's time, as the list says it (a receiver matches the two).
    const listed = await a.client.send<{ message: Array<{ updated_at: number }> }>('GET', '/participants', {
      query: { participant_code: code },
    });
    assert.equal(listed.body.message[0]!.updated_at, payload.timestamp);
    // Created and last changed by the same event, at its time (they differed by a few ms; review).
    const operatorView = await svc.admin.get<{ created_at: number; updated_at: number }>(
      `/participants/${code}`,
    );
    assert.equal(operatorView.created_at, payload.timestamp);
    assert.equal(operatorView.updated_at, payload.timestamp);
  });

  test('every later status change records another participant_status_changed', async () => {
    const res = await create(usCustomer({ kyc: 'fail' }));
    const code = String(res.body.message.participant_code);
    await svc.admin.patch(`/participants/${code}`, { status: 'approved' });
    await svc.admin.patch(`/participants/${code}`, { status: 'locked', reason_code: 'compliance_issue' });
    const payloads = (await participantNotifications(code)).map((n) => n.payload as Record<string, unknown>);
    assert.deepEqual(
      payloads.map((p) => [p.participant_status, p.reason_code]),
      [
        ['submitted', undefined],
        ['approved', undefined],
        ['locked', 'compliance_issue'],
      ],
    );
  });
  test('a new reason_code under the same status is recorded without a participant_status_changed', async () => {
    const res = await create(usCustomer({ kyc: 'fail' }));
    const code = String(res.body.message.participant_code);
    await svc.admin.patch(`/participants/${code}`, { status: 'locked', reason_code: 'compliance_issue' });
    // wire-contract §5: "participant on status change": the status stays locked, so no notification.
    const reasonOnly = await svc.admin.patch<{ status: string; reason_code: string | null }>(
      `/participants/${code}`,
      { status: 'locked', reason_code: 'fraud_review' },
    );
    assert.equal(reasonOnly.status, 'locked');
    assert.equal(reasonOnly.reason_code, 'fraud_review');
    const stored = await svc.admin.get<{ reason_code: string | null }>(`/participants/${code}`);
    assert.equal(stored.reason_code, 'fraud_review', 'the new reason is recorded');
    // Left out, the reason stays while the status does (the CLI's set-status without --reason erased it).
    const kept = await svc.admin.patch<{ reason_code: string | null }>(`/participants/${code}`, {
      status: 'locked',
    });
    assert.equal(kept.reason_code, 'fraud_review');
    const cleared = await svc.admin.patch<{ reason_code: string | null }>(`/participants/${code}`, {
      status: 'locked',
      reason_code: null,
    });
    assert.equal(cleared.reason_code, null);
    await svc.admin.patch(`/participants/${code}`, { status: 'locked', reason_code: 'fraud_review' });
    // And goes with a status change: a reason for being locked does not explain being approved.
    const approved = await svc.admin.patch<{ reason_code: string | null }>(`/participants/${code}`, {
      status: 'approved',
    });
    assert.equal(approved.reason_code, null);
    const payloads = (await participantNotifications(code)).map((n) => n.payload as Record<string, unknown>);
    assert.deepEqual(
      payloads.map((p) => [p.participant_status, p.reason_code]),
      [
        ['submitted', undefined],
        ['locked', 'compliance_issue'],
        ['approved', undefined],
      ],
    );
  });
});

describe('validation: 400 lists every bad field', () => {
  test('formats: email, date_of_birth, jurisdiction and citizenship codes, kyc values, epoch-ms timestamps', async () => {
    const before = await countParticipants();
    const res = await create(
      usCustomer({
        email: 'not-an-email',
        date_of_birth: '1985-02-30',
        jurisdiction_code: 'IL',
        citizenship_code: 'XX',
        kyc: 'passed',
        sanction_screening: true,
        kyc_timestamp: 1_700_000_000, // seconds, not milliseconds
        sanction_screening_timestamp: '1700000000000',
        signed_timestamp: 1_700_000_000_000.5,
      }),
    );
    assert.equal(res.status, 400);
    assertVendorSchema(res.body, 'Code400');
    const errors = res.body.errors!;
    for (const field of [
      'email',
      'date_of_birth',
      'jurisdiction_code',
      'citizenship_code',
      'kyc',
      'sanction_screening',
      'kyc_timestamp',
      'sanction_screening_timestamp',
      'signed_timestamp',
    ]) {
      assert.ok(
        errors.some((e) => e.startsWith(`${field}: `)),
        `${field} is named in ${JSON.stringify(errors)}`,
      );
    }
    assert.ok(errors.includes('date_of_birth: must be a real date in the format YYYY-MM-DD'), String(errors));
    assert.ok(errors.includes('kyc: must be one of pass, fail'), String(errors));
    assert.ok(
      errors.includes('kyc_timestamp: must be an epoch time in milliseconds (13 digits)'),
      String(errors),
    );
    assert.equal(await countParticipants(), before, 'nothing was created');
  });

  test('an email no mailbox can have is refused: a domain label over 63 characters, a local part over 64', async () => {
    const before = await countParticipants();
    for (const email of [`a@${'b'.repeat(64)}.com`, `${'a'.repeat(65)}@example.com`, `a@b..com`]) {
      const res = await create(usCustomer({ email }));
      assert.equal(res.status, 400, `${email}: ${JSON.stringify(res.body)}`);
      assert.ok(
        res.body.errors!.some((e) => e.startsWith('email: ')),
        `${email}: ${JSON.stringify(res.body)}`,
      );
    }
    assert.equal(await countParticipants(), before, 'nothing was created');
    // The bounds themselves are addresses.
    const longest = `${'a'.repeat(64)}@${'b'.repeat(63)}.example.com`;
    const res = await create(usCustomer({ email: longest }));
    assert.equal(res.status, 201, JSON.stringify(res.body));
  });

  test('required fields: each missing one is named', async () => {
    const res = await create({ email: 'someone@example.com' });
    assert.equal(res.status, 400);
    const errors = res.body.errors!;
    for (const field of [
      'first_name',
      'last_name',
      'address_one',
      'city',
      'jurisdiction_code',
      'date_of_birth',
      'citizenship_code',
      'kyc',
      'kyc_timestamp',
      'sanction_screening',
      'sanction_screening_timestamp',
      'signed_timestamp',
    ]) {
      assert.ok(errors.includes(`${field}: is required`), `${field} in ${JSON.stringify(errors)}`);
    }
    assert.ok(!errors.some((e) => e.startsWith('email:')), 'a good email is not reported');
  });

  test('a PO box is one however its letters are written (fullwidth too)', async () => {
    // Identity probe: "Ｐ.Ｏ. Ｂｏｘ 12" was taken; NFKC reads it as "P.O. Box 12".
    // Nor one with what prints as nothing inside (review).
    for (const address_one of [
      'Ｐ.Ｏ. Ｂｏｘ 12',
      'ＰＯ Box 7',
      'P.O. B\u200box 12',
      'P.O. B\u00adox 12',
      'P\u2060O Box 12',
      'PO\u200d Box 12',
    ]) {
      const res = await create(usCustomer({ address_one }));
      assert.equal(res.status, 400, address_one);
      assert.deepEqual(res.body.errors, ['address_one: PO Box addresses are not accepted']);
    }
  });

  test('vendor rules beyond types: dates, time window, PO boxes, US tax id, conditional fields, unknown fields', async () => {
    const now = Date.now();
    const res = await create(
      usCustomer({
        date_of_birth: '2999-01-01',
        kyc_timestamp: now - 400 * 86_400_000,
        sanction_screening_timestamp: now + 2 * 86_400_000,
        // Each signed agreement's time too (the vendor's rule is on signed_agreements[].signed_timestamp).
        signed_agreements: [
          { type: 'zhllc_user_agreement_v1', region: 'us', signed_timestamp: now - 3 * 365 * 86_400_000 },
        ],
        address_one: 'PO Box 123',
        tax_id: '12345',
        id_number_type: 'us_passport',
        id_number: 'X1',
        nickname: 'Ada',
      }),
    );
    assert.equal(res.status, 400);
    assert.deepEqual(
      new Set(res.body.errors),
      new Set([
        'nickname: is not allowed',
        'date_of_birth: must be in the past',
        'kyc_timestamp: must be within the last year and at most one day ahead',
        'sanction_screening_timestamp: must be within the last year and at most one day ahead',
        'signed_agreements[0].signed_timestamp: must be within the last year and at most one day ahead',
        'address_one: PO Box addresses are not accepted',
        'tax_id: must be a 9-digit SSN or ITIN, e.g. 000-00-0000',
        'id_issuing_authority: is required when id_number is given',
        'place_of_birth: is required when id_number_type is us_passport',
        'id_expiration_date: is required when id_number_type is us_passport',
      ]),
    );
  });

  test('metadata as a string over 10,000 characters → 400 that says so', async () => {
    const res = await create(usCustomer({ metadata: 'm'.repeat(10_001) }));
    assert.equal(res.status, 400);
    assert.deepEqual(res.body.errors, [
      'metadata: must be a JSON object or a string of at most 10000 characters',
    ]);
  });

  test('US citizens need a tax_id; other citizens need an ID document', async () => {
    const { tax_id: _t, ...noTaxId } = usCustomer();
    const us = await create(noTaxId);
    assert.equal(us.status, 400);
    assert.deepEqual(us.body.errors, ['tax_id: is required when citizenship_code is US']);

    const foreign = await create(usCustomer({ citizenship_code: 'DE', tax_id: undefined }));
    assert.equal(foreign.status, 400);
    assert.deepEqual(foreign.body.errors, [
      'id_number: is required when citizenship_code is not US',
      'id_number_type: is required when citizenship_code is not US',
    ]);
  });

  test('errors are those of the closest variant: an EU body missing one field is told that field', async () => {
    const { tax_residence: _r, ...body } = euCustomer();
    const res = await create(body);
    assert.equal(res.status, 400);
    assert.deepEqual(res.body.errors, ['tax_residence: is required']);
  });

  test('a body that is not an object, or not JSON, is a 400', async () => {
    for (const body of ['[1,2]', '"text"', '{"first_name": "Ada",']) {
      const res = await create(body);
      assert.equal(res.status, 400, body);
      assert.ok(Array.isArray(res.body.errors), body);
    }
  });

  test('metadata that has no canonical JSON form (spec 7.3 hashes the body) is a 400 naming it, not a 500', async () => {
    const before = await countParticipants();
    // As sent on the wire: JSON escapes a lone surrogate, and JSON.parse makes 1e400 Infinity.
    const withMetadata = (metadata: string) =>
      JSON.stringify(usCustomer()).replace(/}$/, `,"metadata":${metadata}}`);
    for (const [metadata, error] of [
      ['{"k\\ud800":1}', 'metadata: has a key that is not well-formed Unicode text'],
      ['{"big":1e400}', 'metadata.big: must be a number within the range of a double'],
    ]) {
      const res = await create(withMetadata(metadata!));
      assert.equal(res.status, 400, JSON.stringify(res.body));
      assert.deepEqual(res.body.errors, [error]);
    }
    assert.equal(await countParticipants(), before);
  });

  test('X-REQUEST-ID longer than 255 bytes is a 400 naming the header and its bound in bytes', async () => {
    const res = await create(usCustomer(), { 'X-REQUEST-ID': 'r'.repeat(256) });
    assert.equal(res.status, 400);
    assert.deepEqual(res.body.errors, ['x-request-id: must NOT have more than 255 bytes']);
    // The bound is in bytes, as the header is read (probe: 128 × "é", 256 bytes in UTF-8, was said to be more than
    // 255 characters); 127 of them, 254 bytes, are taken.
    const utf8 = (text: string) => Buffer.from(text, 'utf8').toString('latin1');
    const over = await create(usCustomer(), { 'X-REQUEST-ID': utf8('é'.repeat(128)) });
    assert.equal(over.status, 400);
    assert.deepEqual(over.body.errors, ['x-request-id: must NOT have more than 255 bytes']);
    const within = await create(usCustomer(), { 'X-REQUEST-ID': utf8('é'.repeat(127)) });
    assert.equal(within.status, 201, JSON.stringify(within.body));
  });
});

async function countParticipants(): Promise<number> {
  const row = await svc.runtime.store.db
    .selectFrom('participants')
    .select((eb) => eb.fn.countAll<number>().as('n'))
    .where('platform_code', '=', a.platform.platform_code)
    .executeTakeFirstOrThrow();
  return Number(row.n);
}
