import { Type, type Static, type TObject, type TOptional, type TSchema } from 'typebox';
import { GENERATED_CODE_PATTERN, GeneratedCode } from './identifiers.ts';
import {
  Envelope,
  MULTILINE_TEXT,
  MULTILINE_TEXT_PATTERN,
  PageQuery,
  PagedEnvelope,
  NAME_TEXT,
  NAME_TEXT_PATTERN,
} from './responses.ts';
import { PARTICIPANT_STATUS_FILTERS } from './wire-values.ts';

/**
 * Customer onboarding and participant look-ups (spec 4.6, 7.2 last row, 7.3; wire-contract §7, §9) in the
 * vendor's shapes: PostCustomersBody and its variants, PostCustomersResponse, GetParticipantsResponse,
 * GetParticipantByEmailResponse, ParticipantEntity, AdditionalTaxResidence. Shared by the server and the SDK.
 */

// ---- The vendor's value lists (vendor-openapi.json, PostCustomersBody) -------------------------------

/** ISO 3166-1 alpha-2, every code (place of birth, ID issuer, mailing address, treaty country). */
// prettier-ignore
export const COUNTRY_CODES_ALPHA2 = [
  'AD', 'AE', 'AF', 'AG', 'AI', 'AL', 'AM', 'AO', 'AQ', 'AR', 'AS', 'AT', 'AU', 'AW', 'AX', 'AZ', 'BA', 'BB',
  'BD', 'BE', 'BF', 'BG', 'BH', 'BI', 'BJ', 'BL', 'BM', 'BN', 'BO', 'BQ', 'BR', 'BS', 'BT', 'BV', 'BW', 'BY',
  'BZ', 'CA', 'CC', 'CD', 'CF', 'CG', 'CH', 'CI', 'CK', 'CL', 'CM', 'CN', 'CO', 'CR', 'CU', 'CV', 'CW', 'CX',
  'CY', 'CZ', 'DE', 'DJ', 'DK', 'DM', 'DO', 'DZ', 'EC', 'EE', 'EG', 'EH', 'ER', 'ES', 'ET', 'FI', 'FJ', 'FK',
  'FM', 'FO', 'FR', 'GA', 'GB', 'GD', 'GE', 'GF', 'GG', 'GH', 'GI', 'GL', 'GM', 'GN', 'GP', 'GQ', 'GR', 'GS',
  'GT', 'GU', 'GW', 'GY', 'HK', 'HM', 'HN', 'HR', 'HT', 'HU', 'ID', 'IE', 'IL', 'IM', 'IN', 'IO', 'IQ', 'IR',
  'IS', 'IT', 'JE', 'JM', 'JO', 'JP', 'KE', 'KG', 'KH', 'KI', 'KM', 'KN', 'KP', 'KR', 'KW', 'KY', 'KZ', 'LA',
  'LB', 'LC', 'LI', 'LK', 'LR', 'LS', 'LT', 'LU', 'LV', 'LY', 'MA', 'MC', 'MD', 'ME', 'MF', 'MG', 'MH', 'MK',
  'ML', 'MM', 'MN', 'MO', 'MP', 'MQ', 'MR', 'MS', 'MT', 'MU', 'MV', 'MW', 'MX', 'MY', 'MZ', 'NA', 'NC', 'NE',
  'NF', 'NG', 'NI', 'NL', 'NO', 'NP', 'NR', 'NU', 'NZ', 'OM', 'PA', 'PE', 'PF', 'PG', 'PH', 'PK', 'PL', 'PM',
  'PN', 'PR', 'PS', 'PT', 'PW', 'PY', 'QA', 'RE', 'RO', 'RS', 'RU', 'RW', 'SA', 'SB', 'SC', 'SD', 'SE', 'SG',
  'SH', 'SI', 'SJ', 'SK', 'SL', 'SM', 'SN', 'SO', 'SR', 'SS', 'ST', 'SV', 'SX', 'SY', 'SZ', 'TC', 'TD', 'TF',
  'TG', 'TH', 'TJ', 'TK', 'TL', 'TM', 'TN', 'TO', 'TR', 'TT', 'TV', 'TW', 'TZ', 'UA', 'UG', 'UM', 'US', 'UY',
  'UZ', 'VA', 'VC', 'VE', 'VG', 'VI', 'VN', 'VU', 'WF', 'WS', 'YE', 'YT', 'ZA', 'ZM', 'ZW',
] as const;

/** ISO 3166-1 alpha-2 codes the vendor accepts as `citizenship_code`: every country but RU (its list has none). */
export const CITIZENSHIP_CODES = COUNTRY_CODES_ALPHA2.filter(
  (code): code is Exclude<(typeof COUNTRY_CODES_ALPHA2)[number], 'RU'> => code !== 'RU',
);

/** ISO 3166-1 alpha-3 (`country`). */
// prettier-ignore
export const COUNTRY_CODES_ALPHA3 = [
  'AND', 'ARE', 'AFG', 'ATG', 'AIA', 'ALB', 'ARM', 'AGO', 'ATA', 'ARG', 'ASM', 'AUT', 'AUS', 'ABW', 'ALA',
  'AZE', 'BIH', 'BRB', 'BGD', 'BEL', 'BFA', 'BGR', 'BHR', 'BDI', 'BEN', 'BLM', 'BMU', 'BRN', 'BOL', 'BES',
  'BRA', 'BHS', 'BTN', 'BVT', 'BWA', 'BLR', 'BLZ', 'CAN', 'CCK', 'COD', 'CAF', 'COG', 'CHE', 'CIV', 'COK',
  'CHL', 'CMR', 'CHN', 'COL', 'CRI', 'CUB', 'CPV', 'CUW', 'CXR', 'CYP', 'CZE', 'DEU', 'DJI', 'DNK', 'DMA',
  'DOM', 'DZA', 'ECU', 'EST', 'EGY', 'ESH', 'ERI', 'ESP', 'ETH', 'FIN', 'FJI', 'FLK', 'FSM', 'FRO', 'FRA',
  'GAB', 'GBR', 'GRD', 'GEO', 'GUF', 'GGY', 'GHA', 'GIB', 'GRL', 'GMB', 'GIN', 'GLP', 'GNQ', 'GRC', 'SGS',
  'GTM', 'GUM', 'GNB', 'GUY', 'HKG', 'HMD', 'HND', 'HRV', 'HTI', 'HUN', 'IDN', 'IRL', 'ISR', 'IMN', 'IND',
  'IOT', 'IRQ', 'IRN', 'ISL', 'ITA', 'JEY', 'JAM', 'JOR', 'JPN', 'KEN', 'KGZ', 'KHM', 'KIR', 'COM', 'KNA',
  'PRK', 'KOR', 'KWT', 'CYM', 'KAZ', 'LAO', 'LBN', 'LCA', 'LIE', 'LKA', 'LBR', 'LSO', 'LTU', 'LUX', 'LVA',
  'LBY', 'MAR', 'MCO', 'MDA', 'MNE', 'MAF', 'MDG', 'MHL', 'MKD', 'MLI', 'MMR', 'MNG', 'MAC', 'MNP', 'MTQ',
  'MRT', 'MSR', 'MLT', 'MUS', 'MDV', 'MWI', 'MEX', 'MYS', 'MOZ', 'NAM', 'NCL', 'NER', 'NFK', 'NGA', 'NIC',
  'NLD', 'NOR', 'NPL', 'NRU', 'NIU', 'NZL', 'OMN', 'PAN', 'PER', 'PYF', 'PNG', 'PHL', 'PAK', 'POL', 'SPM',
  'PCN', 'PRI', 'PSE', 'PRT', 'PLW', 'PRY', 'QAT', 'REU', 'ROU', 'SRB', 'RUS', 'RWA', 'SAU', 'SLB', 'SYC',
  'SDN', 'SWE', 'SGP', 'SHN', 'SVN', 'SJM', 'SVK', 'SLE', 'SMR', 'SEN', 'SOM', 'SUR', 'SSD', 'STP', 'SLV',
  'SXM', 'SYR', 'SWZ', 'TCA', 'TCD', 'ATF', 'TGO', 'THA', 'TJK', 'TKL', 'TLS', 'TKM', 'TUN', 'TON', 'TUR',
  'TTO', 'TUV', 'TWN', 'TZA', 'UKR', 'UGA', 'UMI', 'USA', 'URY', 'UZB', 'VAT', 'VCT', 'VEN', 'VGB', 'VIR',
  'VNM', 'VUT', 'WLF', 'WSM', 'YEM', 'MYT', 'ZAF', 'ZMB', 'ZWE',
] as const;

/** ISO 3166-2 subdivisions the vendor lists for `jurisdiction_code`. */
// prettier-ignore
export const JURISDICTION_CODES = [
  'US-AL', 'US-AK', 'US-AZ', 'US-AR', 'US-CA', 'US-CO', 'US-CT', 'US-DE', 'US-FL', 'US-GA', 'US-HI', 'US-ID',
  'US-IL', 'US-IN', 'US-IA', 'US-KS', 'US-KY', 'US-LA', 'US-ME', 'US-MD', 'US-MA', 'US-MI', 'US-MN', 'US-MS',
  'US-MO', 'US-MT', 'US-NE', 'US-NV', 'US-NH', 'US-NJ', 'US-NM', 'US-NY', 'US-NC', 'US-ND', 'US-OH', 'US-OK',
  'US-OR', 'US-PA', 'US-RI', 'US-SC', 'US-SD', 'US-TN', 'US-TX', 'US-UT', 'US-VT', 'US-VA', 'US-WA', 'US-WV',
  'US-WI', 'US-WY', 'US-DC', 'US-AS', 'US-GU', 'US-MP', 'US-PR', 'US-UM', 'US-VI',
] as const;

/** "Non-US Citizen Customer - Reliance": the citizenships it accepts. */
// prettier-ignore
export const EU_RELIANCE_CITIZENSHIP_CODES = [
  'IE', 'GB', 'FR', 'DE', 'ES', 'IT', 'NL', 'BE', 'LU', 'AT', 'PT', 'SE', 'NO', 'DK', 'FI', 'CH', 'PL', 'CZ',
  'SK', 'HU', 'GR', 'RO', 'BG', 'HR', 'SI', 'EE', 'LV', 'LT', 'MT', 'CY',
] as const;

/** `industry` */
// prettier-ignore
export const INDUSTRIES = [
  'adult_entertainment', 'advertising_media_marketing', 'agriculture', 'arts_entertainment', 'charity',
  'construction_manufacturing', 'consulting', 'consumer_products_services', 'crypto_mining', 'ecommerce',
  'education', 'electronics', 'fashion', 'financial_services', 'food_beverages', 'government_agency',
  'insurance', 'jewelry_gemstones', 'law_enforcement', 'legal_services', 'mining_energy_chemicals',
  'online_gaming_gambling', 'pharmaceuticals', 'property_real_estate', 'retail_wholesale', 'transportation',
  'travel_car_hire', 'weapons_defense_aerospace', 'other',
] as const;

/** `signed_agreements[].type` */
// prettier-ignore
export const SIGNED_AGREEMENT_TYPES = [
  'fund_auto_convert', 'payment_services_terms', 'account_link', 'account_funding_payouts',
  'account_funding_general', 'account_funding_pay', 'crypto_payouts_service_terms', 'staking',
  'trust_agreement', 'zhllc_user_agreement_v1', 'zhllc_privacy_policy_v1', 'zhllc_regulatory_disclosures_v1',
  'auth_user_services_agreement_v1', 'zhllc_payment_sender_terms_v1', 'zhllc_third_party_disclosures_v1',
  'connect_privacy_policy_v1',
] as const;

/** `signed_agreements[].region` */
// prettier-ignore
export const SIGNED_AGREEMENT_REGIONS = [
  'worldwide', 'us', 'brazil', 'uk', 'eu',
] as const;

export const ID_NUMBER_TYPES = [
  'us_drivers_license',
  'us_passport',
  'us_passport_card',
  'us_permanent_resident_card',
  'us_border_crossing_card',
  'us_alien_card',
  'us_id_card',
  'non_us_passport',
  'non_us_other',
  'passport',
  'eu_drivers_license',
  'national_id',
] as const;
/** ID types that need a place of birth and an expiration date (vendor: "Required if id_number_type=…passport"). */
export const PASSPORT_ID_TYPES = ['passport', 'us_passport', 'non_us_passport'] as const;

const PASS_FAIL = ['pass', 'fail'] as const;
const EXEMPTION_CODES = [
  '1',
  '2',
  '3',
  '4',
  '5',
  '6',
  '7',
  '8',
  '9',
  '10',
  '11',
  '12',
  '13',
  'NONE',
] as const;
const VOLUME_BANDS = ['up_to_5k', '5k_to_25k', '25k_to_100k', '100k_and_up'] as const;

// ---- Field rules ------------------------------------------------------------------------------------

/**
 * Fields that carry epoch milliseconds: 13 digits, never seconds. Numbers, as the vendor types them, so a
 * fraction of a millisecond is taken and echoed as submitted (the vendor's 201 echoes the submission; the
 * service's own timestamps are whole milliseconds, wire-contract §3).
 */
export const EPOCH_MS_FIELDS = [
  'signed_timestamp',
  'kyc_timestamp',
  'sanction_screening_timestamp',
  'self_certification_timestamp',
  'w_form_certification',
  'signature_timestamp',
  'platform_updated_at',
] as const;
/** Vendor: "must be from no longer than one (1) year in the past or one (1) day in the future". */
export const WINDOWED_TIMESTAMP_FIELDS = [
  'signed_timestamp',
  'kyc_timestamp',
  'sanction_screening_timestamp',
] as const;

// A number, as the vendor types these (no `multipleOf: 1`, which it gives its integer-only fields): a client
// that computes `time.time() * 1000` sends a fraction of a millisecond, and was refused (review).
const EpochMs = (description: string) =>
  Type.Number({ minimum: 1_000_000_000_000, maximum: 9_999_999_999_999, description });
const Text = (maxLength = 255, description?: string) =>
  Type.String({
    minLength: 1,
    maxLength,
    pattern: NAME_TEXT_PATTERN,
    description: description ? `${description}; ${NAME_TEXT}` : NAME_TEXT,
  });
/** Free text of a text box (the explanations): line breaks and tabs are part of it. */
const Prose = (maxLength: number) =>
  Type.String({ minLength: 1, maxLength, pattern: MULTILINE_TEXT_PATTERN, description: MULTILINE_TEXT });
const IsoDate = (description: string) => Type.String({ format: 'date', description });
const Choice = <T extends readonly string[]>(values: T, description?: string) =>
  Type.Enum(values, description ? { description } : {});
// vendor: postal codes are "min 4 characters, no leading or trailing spaces"; zip "min 5 characters". Every country
// writes its postal codes in ASCII letters, digits, spaces and hyphens (`SW1A 1AA`, `01310-100`, `D02 X285`): nothing
// else is taken, so that no two codes print alike (probe and review: a BEL, a zero-width space at the end, a no-break
// space inside, Braille blanks).
const POSTAL_CODE_PATTERN = '^[A-Za-z0-9](?:[A-Za-z0-9 -]*[A-Za-z0-9])?$';
const POSTAL_CODE_FORM = 'ASCII letters, digits, spaces and hyphens, a letter or digit at either end';
const PostalCode = (minLength: number, maxLength: number, example?: string) =>
  Type.String({
    minLength,
    maxLength,
    pattern: POSTAL_CODE_PATTERN,
    // Said by a 400 for the pattern.
    description: example ? `${POSTAL_CODE_FORM}; e.g. ${example}` : POSTAL_CODE_FORM,
  });
// ISO 3166-2 subdivision, e.g. PT-11, US-IL: of a country of ISO 3166-1, as every other country field is (probe:
// "ZZ-ZZZ" was taken).
const SUBDIVISION_PATTERN = `^(${COUNTRY_CODES_ALPHA2.join('|')})-[A-Z0-9]{1,3}$`;
// vendor: decimal degrees or degrees-minutes-seconds. Its published pattern lost its backslashes
// ("s+", "d+"); this is that pattern with them restored.
export const COORDINATE_PATTERN =
  '^(([NSEW])\\s+(\\d+(?:\\.\\d+)?)d\\s+(\\d+(?:\\.\\d+)?)m\\s+(\\d+(?:\\.\\d+)?)|(-?\\d+(?:\\.\\d+)?))$';

const CountryAlpha2 = Choice(COUNTRY_CODES_ALPHA2, 'ISO 3166-1 alpha-2');

export const SignedAgreement = Type.Object(
  {
    type: Choice(SIGNED_AGREEMENT_TYPES),
    region: Choice(SIGNED_AGREEMENT_REGIONS),
    signed_timestamp: EpochMs('when the agreement was signed (epoch ms)'),
  },
  { additionalProperties: false },
);

export const TaxResidence = Type.Object(
  {
    address_one: Type.Optional(Text(200)),
    address_two: Type.Optional(Text(200)),
    city: Type.Optional(Text(100)),
    jurisdiction_code: Type.String({ pattern: SUBDIVISION_PATTERN, description: 'ISO 3166-2, e.g. PT-11' }),
    postal_code: Type.Optional(PostalCode(1, 20)),
  },
  { additionalProperties: false },
);

/** The vendor's AdditionalTaxResidence. */
export const AdditionalTaxResidence = Type.Object(
  {
    tax_id: Text(50),
    jurisdiction_code: Type.String({ pattern: SUBDIVISION_PATTERN, description: 'ISO 3166-2, e.g. US-IL' }),
  },
  { additionalProperties: false },
);

const W8Ben = Type.Object(
  {
    ftin: Type.Optional(Text(50)),
    ftin_required: Type.Optional(Type.Boolean()),
    reference_numbers: Type.Optional(Text(255)),
    treaty_claim: Type.Optional(
      Type.Object(
        {
          is_eligible: Type.Optional(Type.Boolean()),
          country: Type.Optional(CountryAlpha2),
          residence_certification: Type.Optional(Type.Boolean()),
          income_type: Type.Optional(Choice(['royalties_other', 'business_profits'] as const)),
          withholding_rate: Type.Optional(
            Type.String({ pattern: '^\\d{1,3}(\\.\\d+)?$', description: 'a percentage, e.g. 15 or 12.5' }),
          ),
          article_paragraph: Type.Optional(Text(255)),
          additional_conditions: Type.Optional(Type.Boolean()),
        },
        { additionalProperties: false },
      ),
    ),
  },
  { additionalProperties: false },
);

/**
 * Every field the vendor accepts, once, with its rule. The variants below pick from it; where a variant
 * narrows a field (citizenships, ID types, address lengths) it says so.
 */
export const CUSTOMER_FIELDS = {
  partial: Type.Literal(true, { description: 'Partially Onboarded Participant: must be true' }),
  first_name: Text(100),
  middle_name: Text(100),
  last_name: Text(100),
  former_name: Text(100),
  email: Type.String({ format: 'email', maxLength: 254, description: 'unique per platform' }),
  phone_number: Type.String({ pattern: '^\\+?[0-9][0-9 ()-]{5,23}[0-9]$', description: 'e.g. 15557778888' }),
  address_one: Text(80, 'max 80 characters (200 on the reliance track); no PO boxes'),
  address_two: Text(50, 'max 50 characters (200 on the reliance track); no PO boxes'),
  city: Text(100),
  zip: PostalCode(5, 10, '77777 or 77777-7777'),
  postal_code: PostalCode(4, 20),
  jurisdiction_code: Choice(JURISDICTION_CODES, 'ISO 3166-2 subdivision the customer resides in'),
  citizenship_code: Choice(CITIZENSHIP_CODES, 'ISO 3166-1 alpha-2'),
  country: Choice(COUNTRY_CODES_ALPHA3, 'ISO 3166-1 alpha-3'),
  date_of_birth: IsoDate('YYYY-MM-DD, in the past'),
  place_of_birth: Type.Object(
    { country_code: CountryAlpha2, place_name: Type.Optional(Text(100)) },
    { additionalProperties: false },
  ),
  tax_id: Text(50, 'national ID, e.g. SSN 000-00-0000; required for US citizens'),
  id_number_type: Choice(ID_NUMBER_TYPES),
  id_number: Text(50),
  non_us_other_type: Text(100, 'required when id_number_type is non_us_other'),
  id_issuing_authority: Choice(COUNTRY_CODES_ALPHA2, 'ISO 3166-1 alpha-2 country that issued the ID'),
  id_issuing_locality: Text(100),
  id_issuing_date: IsoDate('YYYY-MM-DD'),
  id_expiration_date: IsoDate('YYYY-MM-DD'),
  risk_rating: Choice(['low', 'medium', 'high'] as const),
  signed_timestamp: EpochMs(
    'services agreement accepted (epoch ms; within the last year, at most a day ahead)',
  ),
  metadata: Type.Union([Type.Object({}, { additionalProperties: true }), Type.String({ maxLength: 10_000 })]),
  kyc: Choice(PASS_FAIL, 'KYC result by the platform'),
  kyc_timestamp: EpochMs('KYC passed (epoch ms; within the last year, at most a day ahead)'),
  onboarding_profile: Choice(['kyc_track', 'shopper'] as const),
  onboarded_location: Text(10),
  sanction_screening: Choice(PASS_FAIL),
  sanction_screening_timestamp: EpochMs(
    'sanctions screening (epoch ms; within the last year, at most a day ahead)',
  ),
  idv: Choice(PASS_FAIL),
  liveness_check: Choice(PASS_FAIL),
  employment_status: Choice([
    'full_time',
    'part_time',
    'self_employed',
    'unemployed',
    'retired',
    'student',
  ] as const),
  industry: Choice(INDUSTRIES),
  source_of_funds: Choice([
    'salary',
    'savings',
    'pension_retirement',
    'inheritance',
    'investment',
    'loan',
    'gift',
    'other',
  ] as const),
  signed_agreements: Type.Array(SignedAgreement, { maxItems: 50 }),
  salary: Choice([
    'under_3500',
    'between_35001_and_75000',
    'between_75001_and_125000',
    'between_125001_and_200000',
    'over_200000',
  ] as const),
  savings_and_investments: Choice([
    'under_10000',
    'between_10001_and_25000',
    'between_25001_and_50000',
    'between_50001_and_100000',
    'between_100001_and_250000',
    'over_250000',
  ] as const),
  investor_category: Choice([
    'restricted',
    'high_net_worth_individual',
    'certified_sophisticated_investor',
  ] as const),
  distribution_channel: Text(100),
  ip_address: Text(45, 'IPv4 or IPv6 address'),
  tx_equivalent_annual_volume: Choice(VOLUME_BANDS),
  tx_frequency_of_use: Choice(['up_to_12', '12_to_53', '53_to_365', '365_and_up'] as const),
  gross_annual_income_amount: Choice(VOLUME_BANDS),
  tx_type_of_service: Type.Array(
    Choice([
      'unknown',
      'buy_crypto',
      'sell_crypto',
      'swap_crypto',
      'buy_crypto_fiat',
      'sell_crypto_fiat',
      'trade_crypto_crypto',
      'peer_to_peer',
    ] as const),
    { maxItems: 8 },
  ),
  tx_relationship_term_with_service: Choice(['long_term', 'short_term', 'other'] as const),
  tx_relationship_term_with_service_other_explanation: Prose(500),
  gender: Choice(['male', 'female', 'other'] as const),
  purpose_of_transactions: Choice([
    'finvest_personal',
    'finvest_business',
    'payments_personal',
    'payments_business',
    'billpay_personal',
    'billpay_business',
    'p2p_us',
    'p2p_intl',
    'other',
  ] as const),
  purpose_of_transactions_other_explanation: Prose(500),
  expected_monthly_transaction_count: Choice([
    'under_10',
    'between_11_and_100',
    'between_101_and_1000',
    'over_1000',
  ] as const),
  expected_usd_equivalent_daily_volume: Choice([
    'under_1000',
    'between_1001_and_10000',
    'between_10001_and_100000',
    'over_100000',
  ] as const),
  gross_annual_salary_amount: Text(50),
  savings_and_investments_amount: Text(50),
  gross_annual_income: Text(50),
  tx_usd_equivalent_monthly_amount: Text(50),
  tx_usd_equivalent_annual_amount: Text(50),
  platform_updated_at: EpochMs('last update of the customer at the platform (epoch ms)'),
  self_certification_timestamp: EpochMs('tax self-certification (epoch ms)'),
  tax_residence: TaxResidence,
  tin_jurisdiction_reason: Choice([
    'working_abroad',
    'studying_abroad',
    'dual_residency',
    'business_abroad',
    'real_estate_abroad',
    'other',
  ] as const),
  additional_tax_residences: Type.Array(AdditionalTaxResidence, { maxItems: 25 }),
  tin_jurisdiction_other: Text(255),
  proof_of_address_coordinates: Type.Object(
    {
      latitude: Type.String({ pattern: COORDINATE_PATTERN, maxLength: 40, description: 'decimal degrees' }),
      longitude: Type.String({ pattern: COORDINATE_PATTERN, maxLength: 40, description: 'decimal degrees' }),
    },
    { additionalProperties: false },
  ),
  b_notice_receipt: Type.Boolean(),
  w_form_certification: EpochMs('when the W-form was certified (epoch ms)'),
  physical_delivery: Type.Boolean(),
  signature: Text(200),
  signature_timestamp: EpochMs('when the W-form was signed (epoch ms)'),
  payee_exemption: Choice(EXEMPTION_CODES),
  fatca_reporting_exemption: Choice(EXEMPTION_CODES),
  is_not_subject_backup_withholding: Type.Boolean(),
  is_w_form_certified: Type.Boolean(),
  w8_ben: W8Ben,
  mailing_address: Type.Object(
    {
      address_one: Type.Optional(Text(200)),
      address_two: Type.Optional(Text(200)),
      city: Type.Optional(Text(100)),
      state: Type.Optional(Text(100)),
      postal_code: Type.Optional(PostalCode(1, 20)),
      country: Type.Optional(CountryAlpha2),
    },
    { additionalProperties: false },
  ),
};
type Fields = typeof CUSTOMER_FIELDS;
export type CustomerField = keyof Fields;

type VariantProperties<R extends CustomerField, O extends CustomerField> = { [P in R]: Fields[P] } & {
  [P in O]: TOptional<Fields[P]>;
};

/**
 * One of the vendor's PostCustomersBody variants: its required and optional fields, unknown fields refused
 * (wire-contract §9: bodies are validated strictly). `narrow` replaces a field's rule for this variant.
 */
function variant<R extends CustomerField, O extends CustomerField>(
  title: string,
  required: readonly R[],
  optional: readonly O[],
  narrow: Partial<Record<R | O, TSchema>> = {},
): TObject<VariantProperties<R, O>> {
  const properties: Record<string, TSchema> = {};
  for (const name of required) properties[name] = narrow[name] ?? CUSTOMER_FIELDS[name];
  for (const name of optional) properties[name] = Type.Optional(narrow[name] ?? CUSTOMER_FIELDS[name]);
  return Type.Object(properties, { title, additionalProperties: false }) as unknown as TObject<
    VariantProperties<R, O>
  >;
}

/** Fields every variant requires. */
const CORE_REQUIRED = [
  'first_name',
  'last_name',
  'email',
  'address_one',
  'city',
  'jurisdiction_code',
  'date_of_birth',
  'citizenship_code',
  'kyc',
  'kyc_timestamp',
  'sanction_screening',
  'sanction_screening_timestamp',
] as const;
/** The US tax (W-form) attestations every variant but the EU one requires. */
const W_FORM_REQUIRED = [
  'b_notice_receipt',
  'is_w_form_certified',
  'w_form_certification',
  'signature',
  'signature_timestamp',
  'payee_exemption',
  'fatca_reporting_exemption',
  'is_not_subject_backup_withholding',
] as const;
// vendor: on the reliance track address_one and address_two may hold up to 200 characters.
const RELIANCE_ADDRESS = {
  address_one: Text(200, 'max 200 characters (reliance track); no PO boxes'),
  address_two: Text(200, 'max 200 characters (reliance track); no PO boxes'),
};

export const GeneralCustomerBody = variant(
  'Customer - All accepted fields',
  [...CORE_REQUIRED, 'signed_timestamp', ...W_FORM_REQUIRED],
  [
    'middle_name',
    'former_name',
    'address_two',
    'zip',
    'postal_code',
    'phone_number',
    'id_number_type',
    'id_number',
    'country',
    'tax_id',
    'non_us_other_type',
    'id_issuing_authority',
    'risk_rating',
    'metadata',
    'onboarding_profile',
    'onboarded_location',
    'idv',
    'liveness_check',
    'employment_status',
    'industry',
    'source_of_funds',
    'signed_agreements',
    'salary',
    'savings_and_investments',
    'investor_category',
    'distribution_channel',
    'ip_address',
    'place_of_birth',
    'id_expiration_date',
    'id_issuing_date',
    'id_issuing_locality',
    'tx_equivalent_annual_volume',
    'tx_frequency_of_use',
    'gross_annual_income_amount',
    'tx_type_of_service',
    'tx_relationship_term_with_service',
    'tx_relationship_term_with_service_other_explanation',
    'gender',
    'purpose_of_transactions',
    'purpose_of_transactions_other_explanation',
    'expected_monthly_transaction_count',
    'expected_usd_equivalent_daily_volume',
    'gross_annual_salary_amount',
    'savings_and_investments_amount',
    'gross_annual_income',
    'tx_usd_equivalent_monthly_amount',
    'tx_usd_equivalent_annual_amount',
    'platform_updated_at',
    'self_certification_timestamp',
    'tax_residence',
    'tin_jurisdiction_reason',
    'additional_tax_residences',
    'tin_jurisdiction_other',
    'proof_of_address_coordinates',
    'physical_delivery',
    'w8_ben',
    'mailing_address',
  ],
);

export const UsRelianceCustomerBody = variant(
  'US Customer - Reliance',
  [...CORE_REQUIRED, 'zip', 'signed_timestamp', 'tax_id', ...W_FORM_REQUIRED],
  [
    'middle_name',
    'phone_number',
    'address_two',
    'postal_code',
    'onboarding_profile',
    'employment_status',
    'signed_agreements',
    'metadata',
    'tax_residence',
    'tin_jurisdiction_reason',
    'id_number_type',
  ],
  {
    ...RELIANCE_ADDRESS,
    citizenship_code: Choice(['US'] as const, 'US citizens only'),
    id_number_type: Choice(['us_drivers_license', 'us_passport', 'us_passport_card'] as const),
  },
);

export const NonUsRelianceCustomerBody = variant(
  'Non-US Citizen Customer - Reliance',
  [
    ...CORE_REQUIRED,
    'zip',
    'signed_timestamp',
    'id_number_type',
    'id_issuing_authority',
    'id_number',
    ...W_FORM_REQUIRED,
  ],
  [
    'middle_name',
    'phone_number',
    'address_two',
    'postal_code',
    'id_issuing_locality',
    'id_issuing_date',
    'id_expiration_date',
    'non_us_other_type',
    'signed_agreements',
    'w8_ben',
  ],
  {
    ...RELIANCE_ADDRESS,
    citizenship_code: Choice(EU_RELIANCE_CITIZENSHIP_CODES, 'not US'),
    id_number_type: Choice([
      'non_us_passport',
      'non_us_other',
      'us_permanent_resident_card',
      'us_border_crossing_card',
      'us_alien_card',
      'us_id_card',
    ] as const),
  },
);

export const PartialCustomerBody = variant(
  'Partially Onboarded Participant',
  [
    'partial',
    ...CORE_REQUIRED,
    'postal_code',
    'liveness_check',
    'tax_id',
    'signed_agreements',
    'idv',
    ...W_FORM_REQUIRED,
  ],
  [],
);

export const EuCustomerBody = variant(
  'EU Customer',
  [
    ...CORE_REQUIRED,
    'phone_number',
    'signed_timestamp',
    'signed_agreements',
    'idv',
    'liveness_check',
    'employment_status',
    'risk_rating',
    'industry',
    'source_of_funds',
    'savings_and_investments',
    'postal_code',
    'id_number_type',
    'id_issuing_authority',
    'id_expiration_date',
    'id_number',
    'tax_id',
    'tax_residence',
    'self_certification_timestamp',
  ],
  [
    'middle_name',
    'place_of_birth',
    'address_two',
    'id_issuing_date',
    'id_issuing_locality',
    'salary',
    'tx_equivalent_annual_volume',
    'tx_frequency_of_use',
    'tx_type_of_service',
    'tx_relationship_term_with_service',
    'tx_relationship_term_with_service_other_explanation',
    'tin_jurisdiction_reason',
    'proof_of_address_coordinates',
  ],
  {
    id_number_type: Choice([
      'passport',
      'eu_drivers_license',
      'national_id',
      'us_passport',
      'non_us_passport',
      'non_us_other',
      'us_drivers_license',
      'us_id_card',
      'us_passport_card',
    ] as const),
  },
);

/**
 * The variants in the order a body is matched against them: the general form first, then the reliance
 * forms (whose only additions are longer addresses), the EU form and the partially onboarded form.
 */
export const CUSTOMER_BODY_VARIANTS = [
  GeneralCustomerBody,
  UsRelianceCustomerBody,
  NonUsRelianceCustomerBody,
  EuCustomerBody,
  PartialCustomerBody,
] as const;

/**
 * PostCustomersBody: a body is accepted when it satisfies one of the variants. The vendor writes `oneOf`, but
 * its variants overlap (every reliance body is also a general body), so "one of" means "any of".
 */
export const PostCustomerBody = Type.Union([...CUSTOMER_BODY_VARIANTS], {
  description: 'One of the vendor variants: general, US reliance, non-US reliance, EU, partially onboarded',
});
export type PostCustomerBody = Static<typeof PostCustomerBody>;

/** X-REQUEST-ID (spec 4.6, 7.3): optional; the same payload with the same id gets the original 201 again. */
export const CreateCustomerHeaders = Type.Object({
  'x-request-id': Type.Optional(Type.String({ minLength: 1, maxLength: 255 })),
});

/**
 * Fields a request may carry that the vendor's PostCustomersResponse does not have (in none of its variants): not
 * echoed, as a client generated from the vendor's document with strict models (openapi-generator's Java
 * okhttp-gson, by default) refuses an answer with a field its model does not define (probe).
 */
export const REQUEST_ONLY_CUSTOMER_FIELDS = [
  'partial',
  'gross_annual_income',
  'gross_annual_income_amount',
  'savings_and_investments_amount',
  'tx_usd_equivalent_monthly_amount',
  'tx_usd_equivalent_annual_amount',
  'platform_updated_at',
  'w8_ben',
  'mailing_address',
] as const satisfies readonly CustomerField[];
type RequestOnlyField = (typeof REQUEST_ONLY_CUSTOMER_FIELDS)[number];
type ResponseField = Exclude<CustomerField, RequestOnlyField>;

const RESPONSE_FIELDS = Object.fromEntries(
  Object.entries(CUSTOMER_FIELDS)
    .filter(([name]) => !(REQUEST_ONLY_CUSTOMER_FIELDS as readonly string[]).includes(name))
    .map(([name, schema]) => [name, Type.Optional(schema)]),
) as { [P in ResponseField]: TOptional<Fields[P]> };

/**
 * PostCustomersResponse.message: the customer as submitted, with its new participant code, the platform and
 * the status (`approved` when KYC and sanctions screening passed, otherwise `submitted`).
 */
export const CreatedCustomer = Type.Object({
  ...RESPONSE_FIELDS,
  // As any variant takes them, the reliance track's 200 characters included (probe: the answer's 80 and 50 refused
  // the service's own 201 to a client that checks answers).
  address_one: Type.Optional(RELIANCE_ADDRESS.address_one),
  address_two: Type.Optional(RELIANCE_ADDRESS.address_two),
  participant_code: Type.String({ pattern: GENERATED_CODE_PATTERN }),
  platform_code: Type.String(),
  status: Type.String(),
});
export type CreatedCustomer = Static<typeof CreatedCustomer>;
export const CreateCustomerResponse = Envelope(CreatedCustomer);
export type CreateCustomerResponse = Static<typeof CreateCustomerResponse>;

/** The vendor's TransactionLimit (ParticipantEntity.limits). */
export const TransactionLimit = Type.Object({
  type: Type.Array(Type.String()),
  period: Type.Integer(),
  balance: Type.String(),
  limit: Type.String(),
  configured_limit: Type.String(),
  asset: Type.String(),
});

/** The vendor's ParticipantEntity (GET /participants). */
export const ParticipantEntity = Type.Object({
  participant_code: Type.String(),
  participant_name: Type.String(),
  email: Type.Optional(Type.String()),
  status: Type.String(),
  reason_code: Type.Optional(Type.String()),
  jurisdiction_code: Type.Optional(Type.String()),
  limits: Type.Array(TransactionLimit),
  updated_at: Type.Integer({ description: 'epoch milliseconds' }),
});
export type ParticipantEntity = Static<typeof ParticipantEntity>;

/**
 * GET /participants query: the vendor's parameters; any other is refused (400 "<name>: is not allowed"), as on
 * GET /trades, rather than ignored (a misspelt filter answered every participant: review).
 */
export const ListParticipantsQuery = Type.Object(
  {
    participant_code: Type.Optional(GeneratedCode),
    // In the form the participant's email was taken in: case-folded by JavaScript, a look-alike outside it (U+212A
    // KELVIN SIGN for "k") found, and told of, another's participant (probe).
    email: Type.Optional(Type.String({ format: 'email', maxLength: 254 })),
    status: Type.Optional(Choice(PARTICIPANT_STATUS_FILTERS)),
    minors: Type.Optional(Choice(['true', 'false'] as const, '"true": only participants under 18')),
    entity_type: Type.Optional(
      Choice(
        ['corporation', 'llc', 'partnership', 'sole_proprietorship', 'individual'] as const,
        'customers are individuals',
      ),
    ),
    /**
     * The vendor's, undefined beyond "filters for a specific relationship_type". Every participant a platform lists
     * here is its own customer (onboarded by it or for it), so it is accepted, for the vendor's clients, and narrows
     * nothing.
     */
    relationship_type: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
    ...PageQuery,
  },
  { additionalProperties: false },
);
export type ListParticipantsQuery = Static<typeof ListParticipantsQuery>;

/** GetParticipantsResponse: ParticipantEntity items with page, page_size, total_pages and count. */
export const ListParticipantsResponse = PagedEnvelope(ParticipantEntity);
export type ListParticipantsResponse = Static<typeof ListParticipantsResponse>;

export const ParticipantEmailParams = Type.Object({
  email: Type.String({ format: 'email', maxLength: 254, description: 'participant email' }),
});

/** GetParticipantByEmailResponse.message. */
export const ParticipantByEmail = Type.Object({
  participant_code: Type.String(),
  email: Type.String(),
});
export type ParticipantByEmail = Static<typeof ParticipantByEmail>;
export const ParticipantByEmailResponse = Envelope(ParticipantByEmail);
