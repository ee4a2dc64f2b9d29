import { Type, type Static } from 'typebox';
import { NON_NEGATIVE_DECIMAL_PATTERN } from '../lib/decimal.ts';
import { GeneratedCode, ParticipantCodeRef } from './identifiers.ts';
import { CLIENT_TOKEN_PERMISSIONS } from './wire-values.ts';
import {
  AccountLabel,
  Envelope,
  EpochMsFilterParam,
  EpochMsParam,
  NAME_TEXT,
  NAME_TEXT_PATTERN,
  PagedEnvelopeWithoutCount,
  PageParam,
  PRINTABLE_TEXT,
  PRINTABLE_TEXT_PATTERN,
} from './responses.ts';

/**
 * Account funding on the wire (spec 2.2, 2.3, 4.3–4.5; wire-contract §6), with the vendor's field names and
 * shapes (ClientAuthTokenRequestBody, PostFundRfqBody/Response, GetFundTransactionsEntity). Shared by the
 * server, the SDK and the CLI.
 */

/** wire-contract §6: the platform's reference, at most 50 characters. */
const Reference = Type.String({
  maxLength: 50,
  pattern: PRINTABLE_TEXT_PATTERN,
  description: PRINTABLE_TEXT,
});
/** `<ASSET>.<NETWORK>`; whether it is supported is checked by the service, which lists the supported ones. */
const FundAssetForm = Type.String({
  pattern: '^[A-Z0-9]{1,12}\\.[A-Z0-9]{1,12}$',
  // Its bounds said (review: a 13-character asset was told it was not in the form <ASSET>.<NETWORK>).
  description: '<ASSET>.<NETWORK> in capitals and digits, up to 12 characters each, e.g. USDC.ETH',
});

// ---- POST /client_auth_token (spec 4.3) ----

/** A non-negative decimal string (the amounts of the vendor's token request). */
const Amount = Type.String({ pattern: NON_NEGATIVE_DECIMAL_PATTERN, description: 'decimal string' });
const Text = Type.String({ minLength: 1, maxLength: 200 });

/** The most custom fees an SDK's terms take: far more than any fee schedule has. */
export const SDK_FEES_MAX_ITEMS = 50;

/** The vendor's fee terms of the crypto buy and sell SDKs (custom_fees_and_spreads.crypto_buy/crypto_sell). */
const SdkFeesAndSpread = Type.Object(
  {
    spread_bps: Type.Optional(Amount),
    fees: Type.Optional(
      Type.Array(
        Type.Object(
          {
            type: Type.Optional(Type.Enum(['bps', 'notional'] as const)),
            amount: Type.Optional(Amount),
            name: Type.Optional(Text),
          },
          { additionalProperties: false },
        ),
        // The vendor sets no bound; every array a body takes has one (schema-bounds.ts).
        { maxItems: SDK_FEES_MAX_ITEMS },
      ),
    ),
  },
  { additionalProperties: false },
);

/**
 * The vendor's ClientAuthTokenRequestBody: every field of every SDK variant (ClientAuthTokenFull), so that a
 * vendor client's request works unchanged. This service serves the Account Funding SDK only; what it uses is
 * `participant_code`, `permissions`, `reference_id` and `deposit_details.account_label`. The other fields
 * configure the vendor's other SDK experiences (onboarding, payments, withdrawals, buy and sell) or its SDK
 * screens; they are type-checked and not used, as each one says. Any other field → 400 "is not allowed".
 */
export const ClientAuthTokenBody = Type.Object(
  {
    // Vendor: "either participant_code or email"; the email alone serves the onboarding SDK, which creates the
    // participant. Every experience this service serves is for an existing participant, so it is required.
    participant_code: Type.String({ minLength: 6, maxLength: 6, description: 'participant of the platform' }),
    permissions: Type.Array(Type.Enum([...CLIENT_TOKEN_PERMISSIONS]), {
      minItems: 1,
      // Each at most once, so no list a platform can send is longer.
      maxItems: CLIENT_TOKEN_PERMISSIONS.length,
      uniqueItems: true,
      description: 'SDK experiences; `fwc` opens a funding session',
    }),
    reference_id: Type.Optional(Reference),
    deposit_details: Type.Optional(
      Type.Object(
        {
          account_label: AccountLabel,
          // Platform-owned wallet of the vendor's `crypto-deposits` experience: deposits here always go to
          // this service's own deposit addresses, so not used.
          external_wallet_address: Type.Optional(Type.String({ minLength: 1, maxLength: 128 })),
          // An amount the vendor's SDK screen pre-fills; there is no SDK screen here, so not used.
          deposit_amount: Type.Optional(Amount),
          // Vendor: "Only USD is supported".
          denominated_currency: Type.Optional(Type.Enum(['USD'] as const)),
        },
        { additionalProperties: false, description: 'the account the deposits fund (default general)' },
      ),
    ),
    // Not used (other SDK experiences): contact details and OTP channel of the onboarding SDK, ...
    email: Type.Optional(Type.String({ format: 'email', maxLength: 254 })),
    phone_number: Type.Optional(Type.String({ minLength: 1, maxLength: 32 })),
    otp_verified: Type.Optional(Type.Enum(['email', 'sms'] as const)),
    // ... the merchant and payment of the Payins SDK, ...
    merchant_participant_code: Type.Optional(Type.String({ minLength: 1, maxLength: 50 })),
    payment_details: Type.Optional(
      Type.Object({ purchase_amount: Amount, denominated_currency: Text }, { additionalProperties: false }),
    ),
    // ... the withdrawal of the withdrawal and payout SDKs, ...
    withdrawal_details: Type.Optional(
      Type.Object(
        {
          quoted_asset: Text,
          withdrawal_request_amount: Amount,
          external_account_id: Text,
          account_label: Type.Optional(AccountLabel),
        },
        { additionalProperties: false },
      ),
    ),
    // ... the end user's device (the vendor's SDK risk checks), ...
    client_device_info: Type.Optional(
      Type.Object(
        {
          ip_address: Type.String({ minLength: 1, maxLength: 64 }),
          location: Type.String({ minLength: 1, maxLength: 16, description: 'ISO 3166-2, e.g. US-IL' }),
        },
        { additionalProperties: false },
      ),
    ),
    // ... and the fee terms of the buy and sell SDKs.
    custom_fees_and_spreads: Type.Optional(
      Type.Object(
        { crypto_buy: Type.Optional(SdkFeesAndSpread), crypto_sell: Type.Optional(SdkFeesAndSpread) },
        { additionalProperties: false },
      ),
    ),
  },
  { additionalProperties: false },
);
export type ClientAuthTokenBody = Static<typeof ClientAuthTokenBody>;

export const ClientAuthToken = Type.Object({
  token: Type.String({ description: 'JWT (wire-contract §6), valid for one hour' }),
  deposit_intent_id: Type.Optional(
    Type.String({ description: 'with `fwc`: the funding session, a filter of GET /fund/transactions' }),
  ),
});
export type ClientAuthToken = Static<typeof ClientAuthToken>;
export const ClientAuthTokenResponse = Envelope(ClientAuthToken);

// ---- POST /revoke_auth_token ----

export const RevokeClientAuthTokenBody = Type.Object(
  { token: Type.String({ minLength: 1, maxLength: 8192 }) },
  { additionalProperties: false },
);
export type RevokeClientAuthTokenBody = Static<typeof RevokeClientAuthTokenBody>;

// ---- GET /.well-known/jwks.json ----

export const Jwks = Type.Object({
  keys: Type.Array(
    Type.Object({
      kty: Type.String(),
      crv: Type.String(),
      x: Type.String(),
      y: Type.Optional(Type.String()),
      kid: Type.String(),
      alg: Type.String(),
      use: Type.String(),
    }),
  ),
});
export type Jwks = Static<typeof Jwks>;

// ---- POST /fund/rfq (spec 4.4) ----

export const FundRfqBody = Type.Object(
  {
    participant_code: ParticipantCodeRef,
    fund_asset: FundAssetForm,
    account_label: Type.Optional(AccountLabel),
    client_fund_id: Type.Optional(Reference),
  },
  { additionalProperties: false },
);
export type FundRfqBody = Static<typeof FundRfqBody>;

export const FundQuote = Type.Object({
  request_id: Type.String(),
  participant_code: Type.String(),
  fund_asset: Type.String(),
  rate: Type.String(),
  quoted_currency: Type.String(),
  expiry_timestamp: Type.Integer(),
  deposit_address: Type.String(),
  account_label: Type.Optional(Type.String()),
  deposit_fee_bps: Type.Number(),
  deposit_fee_type: Type.Literal('flat'),
  first_deposit_fee_floor: Type.String(),
  subsequent_deposit_fee_floor: Type.String(),
  reference_id: Type.String(),
});
export type FundQuote = Static<typeof FundQuote>;
export const FundQuoteResponse = Envelope(FundQuote);

// ---- Fund events (spec 2.2): GET /fund/transactions and the deposit_fund_complete webhook ----

export const FundEvent = Type.Object({
  participant_code: Type.String(),
  fund_asset: Type.String(),
  rate: Type.String(),
  quoted_currency: Type.String(),
  source_address: Type.String(),
  deposit_address: Type.String(),
  quantity: Type.String(),
  notional: Type.String(),
  success: Type.Boolean(),
  status_reason: Type.String(),
  fund_timestamp: Type.Integer(),
  deposit_timestamp: Type.Integer(),
  transaction_id: Type.String(),
  account_label: Type.String(),
  fund_id: Type.String(),
  is_first_deposit: Type.Boolean(),
  raw_fee_bps: Type.String(),
  deposit_fee_bps: Type.String(),
  raw_fee_notional: Type.String(),
  deposit_fee_notional: Type.String(),
  deposited_asset: Type.String(),
  reference_id: Type.String(),
});
export type FundEvent = Static<typeof FundEvent>;

export const FUND_TRANSACTIONS_MAX_PAGE_SIZE = 50;

export const FundTransactionsQuery = Type.Object(
  {
    participant_code: Type.Optional(ParticipantCodeRef),
    fund_asset: Type.Optional(FundAssetForm),
    deposit_address: Type.Optional(Type.String({ minLength: 1, maxLength: 128 })),
    fund_id: Type.Optional(Type.String({ format: 'uuid' })),
    // A filter: any text (a reference stored before the pattern stays within reach; an odd one matches nothing).
    reference_id: Type.Optional(Type.String({ maxLength: 50 })),
    deposit_intent_id: Type.Optional(Type.String({ format: 'uuid' })),
    success: Type.Optional(Type.Boolean()),
    deposit_timestamp_gte: Type.Optional(EpochMsFilterParam),
    deposit_timestamp_gt: Type.Optional(EpochMsFilterParam),
    deposit_timestamp_lt: Type.Optional(EpochMsFilterParam),
    deposit_timestamp_lte: Type.Optional(EpochMsFilterParam),
    page: Type.Optional(PageParam),
    // wire-contract §9: page_size over the route's maximum → 400.
    page_size: Type.Optional(
      Type.Integer({
        minimum: 1,
        maximum: FUND_TRANSACTIONS_MAX_PAGE_SIZE,
        default: FUND_TRANSACTIONS_MAX_PAGE_SIZE,
      }),
    ),
  },
  { additionalProperties: false },
);
export type FundTransactionsQuery = Static<typeof FundTransactionsQuery>;
export const FundTransactionsResponse = PagedEnvelopeWithoutCount(FundEvent);

// ---- POST /admin/deposits (operator ingestion, where a chain indexer would call) ----

/** What a chain can deposit: at most 30 integer digits and 18 decimal places (ETH's wei, the finest). */
const DepositQuantity = Type.String({
  pattern: '^(0|[1-9][0-9]{0,29})(\\.[0-9]{1,18})?$',
  // Its bounds said, as an amount's (quotes.schemas.ts AMOUNT_FORM): 31 digits were refused as "not in the expected
  // form" with no word of the limit (probe).
  description: 'positive decimal string, at most 30 digits before the point and 18 after',
});

/**
 * A chain's identifier (a transaction id, an address) as an indexer reports it: printable ASCII, no white space. Hex,
 * base58 and bech32 are; a space around one made it another id, so that the same deposit reported once with a
 * space was credited twice (review).
 */
const chainIdentifier = (maxLength: number) =>
  Type.String({
    minLength: 1,
    maxLength,
    pattern: '^[!-~]+$',
    description: 'printable ASCII without white space',
  });

export const RecordDepositBody = Type.Object(
  {
    deposit_address: chainIdentifier(128),
    quantity: DepositQuantity,
    transaction_id: Type.Optional(chainIdentifier(200)),
    source_address: Type.Optional(chainIdentifier(128)),
    fund_asset: Type.Optional(FundAssetForm),
    deposit_timestamp: Type.Optional(EpochMsParam),
    success: Type.Optional(Type.Boolean()),
    // Shown as the fund event's status_reason and sent in webhooks: one printable line (probe: a BEL and a
    // newline were recorded).
    reason: Type.Optional(
      Type.String({ minLength: 1, maxLength: 200, pattern: NAME_TEXT_PATTERN, description: NAME_TEXT }),
    ),
  },
  { additionalProperties: false },
);
export type RecordDepositBody = Static<typeof RecordDepositBody>;
export const RecordedDepositResponse = Envelope(FundEvent);

/**
 * `GET /admin/deposits`: fund events found by the transaction id (in any of the forms a deposit's is taken in), the
 * deposit address or the participant, at least one; newest first.
 */
export const FindDepositsQuery = Type.Object(
  {
    transaction_id: Type.Optional(chainIdentifier(200)),
    deposit_address: Type.Optional(chainIdentifier(128)),
    participant_code: Type.Optional(GeneratedCode),
    page: Type.Optional(PageParam),
    page_size: Type.Optional(Type.Integer({ minimum: 1, maximum: 100 })),
  },
  { additionalProperties: false },
);
export type FindDepositsQuery = Static<typeof FindDepositsQuery>;

/** A fund event as the operator sees it: the platform's view, with the platform and the kind of event. */
export const AdminFundEvent = Type.Object({
  ...FundEvent.properties,
  platform_code: Type.String(),
  kind: Type.Union([Type.Literal('deposit'), Type.Literal('session_expired')]),
});
export type AdminFundEvent = Static<typeof AdminFundEvent>;

export const DepositAddressParams = Type.Object({ address: chainIdentifier(128) });

/** `GET /admin/deposit_addresses/{address}`: whose address it is. */
export const DepositAddressOwner = Type.Object({
  address: Type.String(),
  platform_code: Type.String(),
  participant_code: Type.String(),
  account_label: Type.String(),
  network: Type.String(),
  last_fund_asset: Type.Union([Type.String(), Type.Null()], {
    description: 'the asset of its latest fund quote: what a deposit that names none is taken to be',
  }),
  created_at: Type.Integer(),
});
export type DepositAddressOwner = Static<typeof DepositAddressOwner>;
