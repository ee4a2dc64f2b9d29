/**
 * The contract's fixed values (its value lists, header names and word-for-word messages) as plain constants,
 * without the typebox schemas built from them (`*.schemas.ts`). The SDK and the CLI's client commands need
 * these and no schema: imported from the schema modules, typebox came with them, about 1,400 module loads
 * that were 0.7 s of every `svc` command's start and of `import 'svc-platform/sdk'` under tsx
 * (`bench/cli-start.bench.ts`; `test/unit/light-imports.test.ts` keeps them out).
 */

/** wire-contract §4: the regions of customer account resource names (`zrn:svc:<region>:…`). */
export const REGIONS = ['us', 'eu', 'uk', 'ww', 'bz', 'au'] as const;
export type Region = (typeof REGIONS)[number];

/** Customer account types and tiers (the vendor's PostCustomerAccountRequest). */
export const ACCOUNT_TYPES = ['individual', 'business', 'jtic', 'jtwros', 'trust', 'utma'] as const;
export const ACCOUNT_TIERS = ['lite', 'pro', 'bronze', 'silver', 'gold'] as const;

/** The vendor's SDK permission values (ClientAuthTokenFull.permissions); funding needs `fwc`. */
export const CLIENT_TOKEN_PERMISSIONS = [
  'onboarding',
  'update-participant',
  'csp-active',
  'csp-recovery',
  'fiat-deposits',
  'fiat-withdrawals',
  'crypto-withdrawals',
  'crypto-buy',
  'crypto-sell',
  'fwc',
  'participant-profile',
  'crypto-account-link',
  'crypto-payouts',
  'crypto-pay',
  'fiat-account-link',
] as const;
export type ClientTokenPermission = (typeof CLIENT_TOKEN_PERMISSIONS)[number];
/**
 * The SDK experiences that act on none of the participant's accounts (its profile, onboarding, linking outside
 * accounts, its credentials): a token with only these names no account. Every other one deposits to, withdraws
 * from or trades on an account.
 */
export const ACCOUNTLESS_TOKEN_PERMISSIONS: ReadonlySet<ClientTokenPermission> = new Set([
  'onboarding',
  'update-participant',
  'csp-active',
  'csp-recovery',
  'participant-profile',
  'crypto-account-link',
  'fiat-account-link',
]);
export const FUNDING_PERMISSION: ClientTokenPermission = 'fwc';

export const SIDES = ['buy', 'sell'] as const;

/** The vendor's `quote_expiry` windows and their length (honoured: the quote expires after it). */
export const QUOTE_EXPIRY_WINDOWS_MS = {
  '5s': 5_000,
  '30s': 30_000,
  '1m': 60_000,
  '5m': 300_000,
  '10m': 600_000,
  '15m': 900_000,
} as const;
export type QuoteExpiryWindow = keyof typeof QUOTE_EXPIRY_WINDOWS_MS;

/** Balance account types (GET /accounts `account_type`, balance movements). */
export const BALANCE_ACCOUNT_TYPES = [
  'available',
  'collateral',
  'payable',
  'receivable',
  'collateral_deficiency',
  'staked',
] as const;

/** The vendor's participant statuses (GET /participants `status` filter). */
export const PARTICIPANT_STATUS_FILTERS = [
  'submitted',
  'pending_approval',
  'approved',
  'rejected',
  'locked',
  'pending_unlock',
  'pending_disable',
  'disabled',
  'divested',
  'closed',
] as const;

/** The statuses the operator sets (PATCH /admin/participants/{code}). */
export const PARTICIPANT_STATUS_VALUES = [
  'submitted',
  'approved',
  'rejected',
  'locked',
  'disabled',
  'divested',
  'closed',
] as const;

/**
 * Delivery states: pending (waiting for its first attempt or a redelivery), retrying (failed, next attempt
 * scheduled), delivered, dead (dead letter: retries exhausted or 410 Gone; kept and redeliverable), skipped
 * (the platform's webhook did not want it: none, disabled, or type not subscribed; redeliverable).
 */
export const NOTIFICATION_STATUS_VALUES = ['pending', 'retrying', 'delivered', 'dead', 'skipped'] as const;
export type Side = (typeof SIDES)[number];

export const TRADE_STATES = ['accepted', 'active', 'terminated'] as const;
export type TradeState = (typeof TRADE_STATES)[number];
/** The states a trade moves on from (nothing follows terminated). */
export const ADVANCE_FROM_STATES = ['accepted', 'active'] as const;

/**
 * spec 2.4: the trade status notification omits exactly these fields of the `GET /trades/{trade_id}`
 * object; wire-contract §5 adds `timestamp`.
 */
export const TRADE_NOTIFICATION_OMITTED_FIELDS = [
  'accepted_timestamp',
  'defaulted_timestamp',
  'settled_timestamp',
  'last_update',
  'settlement_timestamp',
  'expiry_timestamp',
  'spread_notional',
  'spread_bps',
  'session_id',
  'payment_processor',
  'fees',
  'batch_trade_id',
] as const;

/** spec 7.3: the two 400 messages, word for word (clients and the SDK's retry rules match on them). */
export const EMAIL_ALREADY_EXISTS = 'Participant already exists with this email for this platform';
export const DATA_USED_WITH_DIFFERENT_REQUEST_ID = 'Participant data already used with different requestID';

/** wire-contract §2.1: the firewall's answer (a 403, text/plain) to an address on no platform's allow-list. */
export const FIREWALL_REFUSAL_TEXT = 'error code: 1020';

export const ALLOW_RETRY_HEADER = 'svc-allow-retry';
export const REQUEST_ID_HEADER = 'x-request-id';
export const SIMULATOR_SCENARIO_HEADER = 'x-simulator-scenario';

/** wire-contract §6: where the public keys that verify Account Funding SDK tokens are published. */
export const JWKS_PATH = '/.well-known/jwks.json';
