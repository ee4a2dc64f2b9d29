import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { checkCustomerBody, type FieldError } from '../../src/contract/participants.validation.ts';
import { payloadHash } from '../../src/domain/participants/participants.service.ts';
import {
  euCustomer,
  nonUsRelianceCustomer,
  partialCustomer,
  usCustomer,
  usRelianceCustomer,
} from '../helpers/onboarding-fixtures.ts';

/** The body check of POST /participants/customers/new and spec 7.3's payload identity, without a server. */
const NOW = Date.UTC(2026, 5, 1, 12, 0, 0);
const DAY = 86_400_000;

/** The errors as the error handler words them ("<field>: <problem>"). */
function messages(errors: FieldError[]): string[] {
  return errors.map((e) => {
    const p = e.params as { missingProperty?: string; additionalProperty?: string };
    const base = e.instancePath.replace(/^\//, '').replaceAll('/', '.');
    if (e.keyword === 'required')
      return `${[base, p.missingProperty].filter(Boolean).join('.')}: is required`;
    if (e.keyword === 'additionalProperties') return `${p.additionalProperty}: is not allowed`;
    return `${base}: ${e.message}`;
  });
}

function rejected(body: unknown, now = NOW) {
  const result = checkCustomerBody(body, now);
  assert.equal(result.ok, false, 'expected the body to be refused');
  return result.ok
    ? { variant: '', errors: [] as string[] }
    : { variant: result.variant, errors: messages(result.errors) };
}

describe('variants', () => {
  test('each vendor variant is recognised', () => {
    for (const [body, variant] of [
      [usCustomer({}, NOW), 'Customer - All accepted fields'],
      [usRelianceCustomer({}, NOW), 'US Customer - Reliance'],
      [nonUsRelianceCustomer({}, NOW), 'Non-US Citizen Customer - Reliance'],
      [euCustomer({}, NOW), 'EU Customer'],
      [partialCustomer({}, NOW), 'Partially Onboarded Participant'],
    ] as const) {
      const result = checkCustomerBody(body, NOW);
      assert.equal(result.ok, true, JSON.stringify(result));
      assert.equal(result.variant, variant);
    }
  });

  test('a reliance-only liberty (a 200-character address) needs the reliance form (zip)', () => {
    const { zip: _zip, ...body } = usRelianceCustomer({}, NOW);
    const { errors } = rejected(body);
    assert.deepEqual(errors, ['address_one: must NOT have more than 80 characters']);
  });

  test('US reliance accepts US citizens only; non-US reliance its 30 citizenships', () => {
    assert.equal(checkCustomerBody(nonUsRelianceCustomer({ citizenship_code: 'JP' }, NOW), NOW).ok, false);
    assert.equal(checkCustomerBody(nonUsRelianceCustomer({ citizenship_code: 'IE' }, NOW), NOW).ok, true);
  });

  test('errors come from the closest variant: shape first, then missing fields', () => {
    const { tax_residence: _t, ...eu } = euCustomer({}, NOW);
    assert.deepEqual(rejected(eu), { variant: 'EU Customer', errors: ['tax_residence: is required'] });
    const general = rejected(usCustomer({ nickname: 'x' }, NOW));
    assert.equal(general.variant, 'Customer - All accepted fields');
    assert.deepEqual(general.errors, ['nickname: is not allowed']);
  });

  test('partial selects the partially onboarded form, and must be true', () => {
    const { variant, errors } = rejected(partialCustomer({ partial: false }, NOW));
    assert.equal(variant, 'Partially Onboarded Participant');
    assert.deepEqual(errors, ['partial: must be true']);
  });
});

describe('rules beyond JSON Schema', () => {
  test('kyc, sanctions and agreement timestamps: within the last year, at most a day ahead (bounds included)', () => {
    for (const field of ['kyc_timestamp', 'sanction_screening_timestamp', 'signed_timestamp']) {
      for (const at of [NOW - 365 * DAY, NOW, NOW + DAY]) {
        assert.equal(checkCustomerBody(usCustomer({ [field]: at }, NOW), NOW).ok, true, `${field} ${at}`);
      }
      for (const at of [NOW - 365 * DAY - 1, NOW + DAY + 1]) {
        assert.deepEqual(rejected(usCustomer({ [field]: at }, NOW)).errors, [
          `${field}: must be within the last year and at most one day ahead`,
        ]);
      }
    }
  });

  test('"the last year" is a calendar year: 366 days through a 29 February, to the 28th from one', () => {
    const kycAt = (at: number, now: number) => checkCustomerBody(usCustomer({ kyc_timestamp: at }, now), now);
    for (const [now, yearBefore] of [
      // 2025-01-15 back to 2024-01-15: 366 days, 29 February 2024 between them.
      [Date.UTC(2025, 0, 15, 9, 30), Date.UTC(2024, 0, 15, 9, 30)],
      // 2024-02-29 back to 2023-02-28, which has no 29th.
      [Date.UTC(2024, 1, 29, 23, 59, 59, 999), Date.UTC(2023, 1, 28, 23, 59, 59, 999)],
      // 2026-03-01 back to 2025-03-01: 365 days.
      [Date.UTC(2026, 2, 1), Date.UTC(2025, 2, 1)],
    ]) {
      assert.equal(kycAt(yearBefore!, now!).ok, true, new Date(now!).toISOString());
      assert.deepEqual(rejected(usCustomer({ kyc_timestamp: yearBefore! - 1 }, now), now).errors, [
        'kyc_timestamp: must be within the last year and at most one day ahead',
      ]);
    }
  });

  test('epoch seconds and strings are not epoch milliseconds; a fraction of one is', () => {
    for (const value of [1_780_000_000, '1780000000000', 17_800_000_000_000]) {
      assert.deepEqual(rejected(usCustomer({ w_form_certification: value }, NOW)).errors, [
        'w_form_certification: must be an epoch time in milliseconds (13 digits)',
      ]);
    }
    // The vendor types them as numbers; Python's `time.time() * 1000` has a fraction (it was refused).
    for (const field of ['w_form_certification', 'kyc_timestamp', 'signed_timestamp']) {
      assert.equal(checkCustomerBody(usCustomer({ [field]: NOW - 0.25 }, NOW), NOW).ok, true, field);
    }
    assert.deepEqual(rejected(usCustomer({ kyc_timestamp: NOW + DAY + 0.5 }, NOW)).errors, [
      'kyc_timestamp: must be within the last year and at most one day ahead',
    ]);
  });

  test('date_of_birth: a real past date', () => {
    assert.deepEqual(rejected(usCustomer({ date_of_birth: '2001-02-29' }, NOW)).errors, [
      'date_of_birth: must be a real date in the format YYYY-MM-DD',
    ]);
    assert.deepEqual(rejected(usCustomer({ date_of_birth: '02/09/1985' }, NOW)).errors, [
      'date_of_birth: must be a real date in the format YYYY-MM-DD',
    ]);
    assert.deepEqual(rejected(usCustomer({ date_of_birth: '2026-06-01' }, NOW)).errors, [
      'date_of_birth: must be in the past',
    ]);
    assert.equal(checkCustomerBody(usCustomer({ date_of_birth: '2000-02-29' }, NOW), NOW).ok, true);
  });

  test('a US ITIN needs an ID document as well', () => {
    assert.deepEqual(rejected(usCustomer({ tax_id: '912-34-5678' }, NOW)).errors, [
      'id_number: is required when tax_id is an ITIN',
      'id_number_type: is required when tax_id is an ITIN',
    ]);
  });

  test('an address in the USA needs its zip', () => {
    assert.deepEqual(rejected(usCustomer({ country: 'USA' }, NOW)).errors, [
      'zip: is required when country is USA',
    ]);
    assert.equal(checkCustomerBody(usCustomer({ country: 'USA', zip: '60601' }, NOW), NOW).ok, true);
    // Elsewhere a postal code is optional, as before.
    assert.equal(checkCustomerBody(usCustomer({ country: 'CAN' }, NOW), NOW).ok, true);
  });

  test('W-8BEN: ftin unless not required; treaty details when eligible', () => {
    const { errors } = rejected(
      nonUsRelianceCustomer(
        { w8_ben: { ftin_required: true, treaty_claim: { is_eligible: true, country: 'FR' } } },
        NOW,
      ),
    );
    assert.deepEqual(errors, [
      'w8_ben.ftin: is required unless ftin_required is false',
      'w8_ben.treaty_claim.residence_certification: is required when is_eligible is true',
      'w8_ben.treaty_claim.income_type: is required when is_eligible is true',
      'w8_ben.treaty_claim.withholding_rate: is required when is_eligible is true',
      'w8_ben.treaty_claim.article_paragraph: is required when is_eligible is true',
      'w8_ben.treaty_claim.additional_conditions: is required when is_eligible is true',
    ]);
  });

  test('a lone surrogate is a 400, not a crash of the canonical hash', () => {
    assert.deepEqual(rejected(usCustomer({ city: 'Chicago\uD800' }, NOW)).errors, [
      'city: must be well-formed Unicode text',
    ]);
  });

  test('values without a canonical form are reported up to one more than a 400 lists, however many there are', () => {
    // metadata takes any object: 1 MB of 1e400 was 166,000 errors; under a 16 KB key, 1,400 of them held the event
    // loop for 8.7 s (probe).
    const key = 'k'.repeat(100);
    const infinite = Object.fromEntries(Array.from({ length: 2_000 }, (_, i) => [`n${i}`, Infinity]));
    const result = checkCustomerBody(usCustomer({ metadata: { [key]: infinite } }, NOW), NOW);
    assert.equal(result.ok, false);
    const errors = result.ok ? [] : result.errors;
    // And a last that says the walk stopped there (the 400's "more problems than these, not listed").
    assert.equal(errors.length, 52);
    assert.ok(
      errors.slice(0, 51).every((e) => e.message === 'must be a number within the range of a double'),
    );
    assert.equal(errors[51]!.keyword, 'notAllChecked');
    // Exactly 51: every one listed, nothing more to say.
    const fiftyOne = Object.fromEntries(Array.from({ length: 51 }, (_, i) => [`n${i}`, Infinity]));
    const all = checkCustomerBody(usCustomer({ metadata: fiftyOne }, NOW), NOW);
    assert.ok(!all.ok && all.errors.length === 51 && all.errors.every((e) => e.keyword !== 'notAllChecked'));
    assert.equal(errors[0]!.instancePath, `/metadata/${key}/n0`);
  });
});

describe('spec 7.3 payload identity', () => {
  test('the same JSON value hashes the same, whatever the key order or white space', () => {
    const one = JSON.parse('{"a": 1, "b": {"x": [1, 2, {"k": "v"}], "y": null}, "c": 1.0}');
    const two = JSON.parse('{ "c":1,"b":{"y":null,\n"x":[1,2,{"k":"v"}]},"a":1 }');
    assert.equal(payloadHash(one), payloadHash(two));
    assert.match(payloadHash(one), /^[0-9a-f]{64}$/);
  });

  test('any other difference is a different payload', () => {
    const base = { a: 1, list: [1, 2], text: 'Ada' };
    for (const other of [
      { a: 2, list: [1, 2], text: 'Ada' },
      { a: 1, list: [2, 1], text: 'Ada' },
      { a: 1, list: [1, 2], text: 'ada' },
      { a: 1, list: [1, 2], text: 'Ada', extra: null },
      { a: '1', list: [1, 2], text: 'Ada' },
    ]) {
      assert.notEqual(payloadHash(base), payloadHash(other), JSON.stringify(other));
    }
  });
});
