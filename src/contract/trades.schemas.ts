import { Type, type Static, type TSchema } from 'typebox';
import {
  AccountLabel,
  Envelope,
  MULTILINE_TEXT,
  MULTILINE_TEXT_PATTERN,
  PagedEnvelope,
  PageParam,
  VISIBLE_TEXT,
  VISIBLE_TEXT_PATTERN,
} from './responses.ts';
import { GeneratedCode } from './identifiers.ts';
import { Amount, QuotedCurrency, Underlying } from './quotes.schemas.ts';
import {
  ADVANCE_FROM_STATES,
  SIDES,
  TRADE_NOTIFICATION_OMITTED_FIELDS,
  TRADE_STATES,
} from './wire-values.ts';

/**
 * Trades (spec 3.1, 4.6, 6; wire-contract §5, §7) in the vendor's shapes (TradeResponseEntity,
 * GetTradeResponse, GetTradesResponse), the trade status notification, and the operator's calls.
 */

export const SETTLEMENT_STATES = [
  'obligations_outstanding',
  'current_obligations_met',
  'settled',
  'defaulted',
  'counterparty_defaulted',
] as const;

const Nullable = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()]);
const EpochMs = Type.Integer({ minimum: 0, description: 'epoch milliseconds' });

/**
 * One side of a trade; `asset` and `amount` are what that party receives (vendor: settlement currency).
 * `liquidity_indicator` (CLOB only) is left out: the vendor's enum has no null, so null would not conform.
 */
export const TradeParty = Type.Object({
  side: Type.Enum(SIDES),
  participant_code: Type.String(),
  asset: Type.String(),
  amount: Type.String(),
  client_order_id: Type.Null(),
  order_id: Type.Null(),
  obligations_outstanding_timestamp: Nullable(EpochMs),
  current_obligations_met_timestamp: Nullable(EpochMs),
  settlement_state: Nullable(Type.Enum(SETTLEMENT_STATES)),
  execution_id: Type.Null(),
  settling: Type.Boolean(),
  account_label: Nullable(Type.String()),
  collateral_percentage: Type.Null(),
  account_profile: Type.Null(),
  trader: Nullable(Type.String()),
  zrn: Nullable(Type.String()),
  manual_order_indicator: Type.Null(),
});
export type TradeParty = Static<typeof TradeParty>;

/** The vendor's TradeResponseEntity: the `GET /trades/{trade_id}` object. */
export const Trade = Type.Object({
  trade_id: Type.String(),
  client_trade_id: Type.String(),
  batch_trade_id: Type.Null(),
  trade_reporter: Type.String(),
  trade_reporter_code: Type.String(),
  reporting_party: Type.String(),
  settlement_schedule: Type.Null(),
  platform_code: Type.String(),
  market_identifier_code: Type.Null(),
  symbol: Type.String(),
  product_type: Type.Enum(['spot'] as const),
  trade_type: Type.Enum(['regular'] as const),
  trade_price: Type.String(),
  trade_quantity: Type.String(),
  trade_state: Type.Enum(TRADE_STATES),
  physical_delivery: Type.Boolean(),
  transaction_timestamp: EpochMs,
  accepted_timestamp: EpochMs,
  defaulted_timestamp: Type.Null(),
  settled_timestamp: Nullable(EpochMs),
  comment: Nullable(Type.String()),
  last_update: EpochMs,
  parties_anonymous: Type.Boolean(),
  settlement_price_index_id: Type.Null(),
  contract_size: Type.Integer(),
  underlying: Type.String(),
  quoted_currency: Type.String(),
  settlement_timestamp: Nullable(EpochMs),
  expiry_timestamp: Type.Null(),
  bank_fee: Type.Null(),
  spread_notional: Nullable(Type.String()),
  spread_bps: Nullable(Type.String()),
  issuer_fee_rate: Type.Null(),
  issuer_fee_amount: Type.Null(),
  issuer_fee_payor_type: Type.Null(),
  origin: Nullable(Type.Enum(['rest_api'] as const)),
  parties: Type.Array(TradeParty, { minItems: 2, maxItems: 2 }),
  session_id: Type.String(),
  payment_processor: Type.Null(),
  fees: Type.Array(Type.Object({ name: Type.String(), amount: Type.String() })),
  network_fee_notional: Nullable(Type.String()),
  network_fee_quantity: Nullable(Type.String()),
  total_notional: Type.String(),
  asset_cost_notional: Type.String(),
});
export type Trade = Static<typeof Trade>;

/** The `trade_status_changed` webhook payload (header `x-svc-hook-payload-type: trade_status_changed`). */
export const TradeStatusNotification = Type.Object({
  ...Type.Omit(Trade, TRADE_NOTIFICATION_OMITTED_FIELDS).properties,
  timestamp: EpochMs,
});
export type TradeStatusNotification = Static<typeof TradeStatusNotification>;

export const TradeResponse = Envelope(Trade);
export const TradesPage = PagedEnvelope(Trade);

export const TradeParams = Type.Object({ trade_id: Type.String({ minLength: 1, maxLength: 100 }) });
export type TradeParams = Static<typeof TradeParams>;

/**
 * `POST /admin/trades/{trade_id}/advance`: `from`, the state the operator means to advance the trade from, makes
 * a repeat safe (a 409 when the trade has left it: the step was made, by the first call or the settlement
 * timer). Without it, each call makes the next step.
 */
export const AdvanceTradeBody = Type.Object(
  { from: Type.Optional(Type.Enum(ADVANCE_FROM_STATES)) },
  { additionalProperties: false },
);
export type AdvanceTradeBody = Static<typeof AdvanceTradeBody>;

export const TRADES_MAX_PAGE_SIZE = 100;
export const TRADES_DEFAULT_PAGE_SIZE = 50;

/**
 * `GET /trades` filters (the vendor's list). The vendor accepts `transaction_timestamp[…]` in
 * milliseconds or nanoseconds (a `number`, so with a fraction too); a value above 10^14 is read as
 * nanoseconds.
 */
const TimestampFilter = Type.Optional(
  // A number as text: nanoseconds pass 2^53, so they are read exactly (BigInt), never as a float. With an
  // exponent too: Python prints a float of nanoseconds as `1.7953446824844147e+18`, and such requests were
  // refused (review); the service bounds the value once expanded (trades.service.ts).
  Type.String({
    pattern: '^[0-9]{1,20}(\\.[0-9]{1,20})?([eE][+-]?[0-9]{1,2})?$',
    description:
      'epoch milliseconds or nanoseconds: up to 20 digits, then optionally a fraction of up to 20 digits and an exponent of up to 2',
  }),
);
export const ListTradesQuery = Type.Object(
  {
    client_trade_id: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
    trade_state: Type.Optional(Type.Enum(TRADE_STATES)),
    settlement_state: Type.Optional(Type.Enum(['null', ...SETTLEMENT_STATES] as const)),
    account_label: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
    party_code: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
    // Named by the vendor's description of this list ("optional filters: participant_code, asset,
    // underlying, …") though not among its parameters: a client written from the prose sends them.
    participant_code: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
    asset: Type.Optional(Type.String({ minLength: 1, maxLength: 32 })),
    underlying: Type.Optional(Type.String({ minLength: 1, maxLength: 32 })),
    platform_code: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
    omit_platform_code: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
    reporting_party: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
    market_identifier_code: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
    omit_market_identifier_code: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
    execution_id: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
    settlement_schedule: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
    'transaction_timestamp[gt]': TimestampFilter,
    'transaction_timestamp[gte]': TimestampFilter,
    'transaction_timestamp[e]': TimestampFilter,
    'transaction_timestamp[lt]': TimestampFilter,
    'transaction_timestamp[lte]': TimestampFilter,
    page: Type.Optional(PageParam),
    // wire-contract §9: page_size over the route's maximum → 400.
    page_size: Type.Optional(
      Type.Integer({ minimum: 1, maximum: TRADES_MAX_PAGE_SIZE, default: TRADES_DEFAULT_PAGE_SIZE }),
    ),
  },
  { additionalProperties: false },
);
export type ListTradesQuery = Static<typeof ListTradesQuery>;

// ---- Operator API (DESIGN §3) ----

/** `POST /admin/trades`: books a trade directly, e.g. a net settlement (allocation) trade. */
export const BookTradeBody = Type.Object(
  {
    platform_code: GeneratedCode,
    participant_code: GeneratedCode,
    account_label: Type.Optional(AccountLabel),
    side: Type.Enum(SIDES),
    underlying: Underlying,
    quoted_currency: QuotedCurrency,
    quantity: Amount,
    price: Amount,
    // Both are read by the platform in its trades and their webhooks: no control or bidirectional characters (review:
    // a BEL and a right-to-left override were booked); an id has nothing invisible and no space at either end, a
    // comment may run over lines.
    client_trade_id: Type.Optional(
      Type.String({ minLength: 1, maxLength: 50, pattern: VISIBLE_TEXT_PATTERN, description: VISIBLE_TEXT }),
    ),
    net_settlement: Type.Optional(Type.Boolean({ default: false })),
    comment: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 500,
        pattern: MULTILINE_TEXT_PATTERN,
        description: MULTILINE_TEXT,
      }),
    ),
  },
  { additionalProperties: false },
);
export type BookTradeBody = Static<typeof BookTradeBody>;

/** What the operator sees of a trade: the public object plus what the public shape has no field for. */
export const AdminTrade = Type.Object({
  ...Trade.properties,
  net_settlement: Type.Boolean(),
  withdrawal_request_id: Nullable(Type.String()),
});
export type AdminTrade = Static<typeof AdminTrade>;
export const AdminTradeResponse = Envelope(AdminTrade);

/** `GET /admin/trades`: a platform's trades, newest first, optionally of a party, in a state, or by client trade id. */
export const AdminListTradesQuery = Type.Object(
  {
    platform_code: GeneratedCode,
    participant_code: Type.Optional(GeneratedCode),
    trade_state: Type.Optional(Type.Enum(TRADE_STATES)),
    client_trade_id: Type.Optional(
      Type.String({
        minLength: 1,
        maxLength: 100,
        description: "the platform's id, or the quote id of a quote's trade",
      }),
    ),
    page: Type.Optional(PageParam),
    page_size: Type.Optional(Type.Integer({ minimum: 1, maximum: TRADES_MAX_PAGE_SIZE })),
  },
  { additionalProperties: false },
);
export type AdminListTradesQuery = Static<typeof AdminListTradesQuery>;
export const AdminTradesPage = PagedEnvelope(AdminTrade);
