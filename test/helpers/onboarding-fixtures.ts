import { randomBytes } from 'node:crypto';

/**
 * Customer bodies for POST /participants/customers/new, one per vendor variant, with timestamps inside the
 * vendor's window (within the last year, at most a day ahead) and a fresh email unless one is given.
 */
let counter = 0;

export function uniqueEmail(prefix = 'customer'): string {
  return `${prefix}${++counter}.${randomBytes(4).toString('hex')}@example.com`;
}

function stamps(now: number) {
  return {
    kyc_timestamp: now - 60_000,
    sanction_screening_timestamp: now - 60_000,
    signed_timestamp: now - 60_000,
  };
}

const W_FORM = (now: number) => ({
  b_notice_receipt: false,
  is_w_form_certified: true,
  w_form_certification: now - 60_000,
  signature: 'Ada Lovelace',
  signature_timestamp: now - 60_000,
  payee_exemption: 'NONE',
  fatca_reporting_exemption: 'NONE',
  is_not_subject_backup_withholding: true,
});

/** "Customer - All accepted fields": a US citizen with the required fields only. */
export function usCustomer(
  overrides: Record<string, unknown> = {},
  now = Date.now(),
): Record<string, unknown> {
  return {
    first_name: 'Ada',
    last_name: 'Lovelace',
    email: uniqueEmail(),
    address_one: '1 Main St',
    city: 'Chicago',
    jurisdiction_code: 'US-IL',
    date_of_birth: '1985-09-02',
    citizenship_code: 'US',
    tax_id: '123-45-6789',
    kyc: 'pass',
    sanction_screening: 'pass',
    ...stamps(now),
    ...W_FORM(now),
    ...overrides,
  };
}

/** "US Customer - Reliance": adds zip, allows a 200-character address. */
export function usRelianceCustomer(overrides: Record<string, unknown> = {}, now = Date.now()) {
  return usCustomer({ zip: '60601', address_one: `${'Long Street Name '.repeat(8)}1`, ...overrides }, now);
}

/** "Non-US Citizen Customer - Reliance": a French citizen with a non-US passport. */
export function nonUsRelianceCustomer(overrides: Record<string, unknown> = {}, now = Date.now()) {
  const { tax_id: _taxId, ...base } = usCustomer({}, now);
  return {
    ...base,
    citizenship_code: 'FR',
    zip: '60601',
    id_number_type: 'non_us_passport',
    id_number: '12AB34567',
    id_issuing_authority: 'FR',
    id_expiration_date: '2031-05-01',
    ...overrides,
  };
}

/** "EU Customer": no W-form; EU identity, tax residence and profile fields. */
export function euCustomer(overrides: Record<string, unknown> = {}, now = Date.now()) {
  return {
    first_name: 'Jan',
    last_name: 'de Vries',
    email: uniqueEmail('eu'),
    phone_number: '31201234567',
    address_one: 'Damrak 1',
    city: 'Amsterdam',
    postal_code: '1012 LG',
    jurisdiction_code: 'US-NY',
    date_of_birth: '1990-01-31',
    citizenship_code: 'NL',
    place_of_birth: { country_code: 'NL', place_name: 'Amsterdam' },
    id_number_type: 'passport',
    id_number: 'NX1234567',
    id_issuing_authority: 'NL',
    id_expiration_date: '2030-01-01',
    tax_id: 'NL123456789',
    kyc: 'pass',
    sanction_screening: 'pass',
    ...stamps(now),
    signed_agreements: [{ type: 'zhllc_user_agreement_v1', region: 'eu', signed_timestamp: now - 60_000 }],
    idv: 'pass',
    liveness_check: 'pass',
    employment_status: 'full_time',
    risk_rating: 'low',
    industry: 'education',
    source_of_funds: 'salary',
    savings_and_investments: 'under_10000',
    tax_residence: { jurisdiction_code: 'NL-NH' },
    self_certification_timestamp: now - 60_000,
    ...overrides,
  };
}

/** "Partially Onboarded Participant". */
export function partialCustomer(overrides: Record<string, unknown> = {}, now = Date.now()) {
  const { signed_timestamp: _signed, ...base } = usCustomer({}, now);
  return {
    ...base,
    partial: true,
    postal_code: '60601',
    liveness_check: 'pass',
    idv: 'pass',
    signed_agreements: [{ type: 'zhllc_user_agreement_v1', region: 'us', signed_timestamp: now - 60_000 }],
    ...overrides,
  };
}
