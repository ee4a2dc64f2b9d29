import { Type, type Static } from 'typebox';
import {
  ACCOUNT_LABEL_FORM,
  AccountLabel,
  Envelope,
  VISIBLE_TEXT,
  VISIBLE_TEXT_PATTERN,
} from './responses.ts';
import { ParticipantCodeRef } from './identifiers.ts';
import { QUOTE_EXPIRY_WINDOWS_MS, SIDES, type QuoteExpiryWindow } from './wire-values.ts';

/**
 * Liquidity and convert-and-withdraw quotes (spec 4.6, wire-contract §7), in the vendor's shapes
 * (PostRequestForQuoteBody, GetRequestForQuoteResponse, PostExecuteQuoteBody, PostExecuteQuoteResponse,
 * PostCWRequestForQuoteBody, CWQuoteEntity, PostCWExecuteQuoteBody, PostCWExecuteQuoteResponse).
 * Shared by the routes and the SDK. Every field of the vendor's request shapes (query and body) is accepted
 * with the vendor's type, so that a vendor client's request works unchanged; a field this service has no use
 * for says so where it is declared. Any other field is refused (400 "is not allowed").
 */

/** Largest number of decimal places of a computed amount; inputs may not carry more. */
export const AMOUNT_DECIMALS = 18;

/**
 * A positive quantity or total as a decimal string: at most 12 integer digits and 18 decimal places, so
 * every amount derived from it fits the vendor's 30-character party amounts.
 */
export const AMOUNT_PATTERN = '^(0|[1-9][0-9]{0,11})(\\.[0-9]{1,18})?$';
/** Spread in basis points, 0 ≤ spread < 10000 (a sell price must stay positive). */
export const SPREAD_PATTERN = '^(0|[1-9][0-9]{0,3})(\\.[0-9]{1,4})?$';
/** An asset, optionally with its network (`USDC.ETH`); balances are held in the asset without it. */
export const UNDERLYING_PATTERN = '^[A-Z0-9]{1,12}(\\.[A-Z0-9]{1,12})?$';
export const CURRENCY_PATTERN = '^[A-Z0-9]{1,12}$';
/** A non-negative decimal string (fee amounts of the vendor's request shapes). */
const UNSIGNED_DECIMAL_PATTERN = '^(0|[1-9][0-9]{0,29})(\\.[0-9]{1,18})?$';

/** How an amount out of AMOUNT_PATTERN is told: its bounds too (review: "positive decimal string" for 13 digits). */
const AMOUNT_FORM = 'positive decimal string, at most 12 digits before the point and 18 after';
export const Amount = Type.String({ pattern: AMOUNT_PATTERN, description: AMOUNT_FORM });
/** The vendor's party amounts are at most 30 characters: those asked for, and those a quote computes (pricing.ts). */
export const MAX_AMOUNT_LENGTH = 30;
/**
 * An amount asked for in a quote. The pattern alone lets through 31 characters (12 digits, a point, 18 decimals),
 * which pricing then refused as a computed amount too large "at" the price (review).
 */
const QuoteAmount = Type.String({
  pattern: AMOUNT_PATTERN,
  maxLength: MAX_AMOUNT_LENGTH,
  // Both bounds said: "12 digits before the point and 18 after" read as allowing 31 characters (probe).
  description: `${AMOUNT_FORM}, ${MAX_AMOUNT_LENGTH} characters in all`,
});
const Side = Type.Enum(SIDES, { description: "the participant's side" });
export const Underlying = Type.String({
  pattern: UNDERLYING_PATTERN,
  description: 'the underlying asset, e.g. BTC',
});
export const QuotedCurrency = Type.String({
  pattern: CURRENCY_PATTERN,
  description: 'the quoted asset, e.g. USD',
});
const ParticipantCode = Type.String({
  ...ParticipantCodeRef,
  description: 'participant code, 1 to 6 characters of [A-Za-z0-9_-]; default: the platform itself',
});
const QuoteAccountLabel = Type.String({
  ...AccountLabel,
  description: `the account that funds the trade; default 'general'; ${ACCOUNT_LABEL_FORM}`,
});
/** How a spread out of SPREAD_PATTERN is told: its bounds too, as an amount's are (probe: only "basis points"). */
const Spread = Type.String({
  pattern: SPREAD_PATTERN,
  description: 'spread in basis points, from 0 to 9999.9999, at most 4 decimal places',
});

/** Fields every RFQ has, liquidity or convert and withdraw. */
const quoteFields = {
  side: Side,
  underlying: Underlying,
  quoted_currency: QuotedCurrency,
  quantity: Type.Optional(QuoteAmount),
  total: Type.Optional(QuoteAmount),
  participant_code: Type.Optional(ParticipantCode),
  account_label: Type.Optional(QuoteAccountLabel),
  spread: Type.Optional(Spread),
};

/**
 * The vendor's DynamicFeeRequest, type-checked here. This service charges no custom fees (its quotes carry no
 * fee fields), so the quotes service refuses a non-empty `fees` by name rather than not charge them.
 */
const DynamicFee = Type.Object(
  {
    name: Type.String({ minLength: 1, maxLength: 100 }),
    amount: Type.String({ pattern: UNSIGNED_DECIMAL_PATTERN, description: 'decimal string' }),
    type: Type.Optional(Type.Enum(['notional', 'bps'] as const)),
  },
  { additionalProperties: false },
);

const Fees = Type.Array(DynamicFee, {
  maxItems: 5,
  description: 'custom fees: not available on this service, so only an empty list is taken',
});

/** The vendor's payment processor metadata (a PSP's name and payment id); accepted and not used. */
const PaymentProcessor = Type.Object(
  {
    name: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    id: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
  },
  { additionalProperties: false },
);

/** `GET /liquidity/rfq` query: every parameter of the vendor's operation. */
const liquidityQuoteFields = {
  ...quoteFields,
  // Vendor: a commission in basis points, mutually exclusive with `spread`, only for platforms with the
  // commission feature. No platform here has it: type-checked here, refused by name by the quotes service.
  commission: Type.Optional(
    Type.String({
      pattern: SPREAD_PATTERN,
      description:
        'commission in basis points: not available on this service, refused (quotes carry a spread only)',
    }),
  ),
  // Honoured: the quote expires after this window instead of the platform's quote expiry.
  quote_expiry: Type.Optional(
    Type.Enum(Object.keys(QUOTE_EXPIRY_WINDOWS_MS) as QuoteExpiryWindow[], {
      description:
        "how long the quote can be executed; default: the platform's quote expiry. Gated per platform: where the operator turned it off (quote_expiry_requests false), a 400 naming it",
    }),
  ),
};

/** `GET /liquidity/rfq` query; exactly one of quantity and total. */
export const LiquidityQuoteRequest = Type.Object(liquidityQuoteFields, { additionalProperties: false });
export type LiquidityQuoteRequest = Static<typeof LiquidityQuoteRequest>;

/** `POST /liquidity/rfq` body (the vendor's PostRequestForQuoteBody): the query's fields and the body-only ones. */
export const LiquidityQuoteBody = Type.Object(
  {
    ...liquidityQuoteFields,
    fees: Type.Optional(Fees),
    payment_processor: Type.Optional(PaymentProcessor),
    // STANDARD is the only settlement this service (and the vendor) has: honoured by being what happens.
    settlement_type: Type.Optional(Type.Enum(['STANDARD'] as const)),
  },
  { additionalProperties: false },
);
export type LiquidityQuoteBody = Static<typeof LiquidityQuoteBody>;

/** `GET /convert_withdraw/rfq` query: every parameter of the vendor's operation. */
const convertWithdrawQuoteFields = {
  ...quoteFields,
  side: Type.Enum(SIDES, {
    description: "the participant's side: only `buy` on this service (the bought asset is withdrawn)",
  }),
  // No chain is connected (DESIGN §1), so the address is not checked against an underlying's network; but
  // no network's address holds a space, a control character or anything beyond printable ASCII, and such a
  // value (a blank, an emoji) was booked as where funds go (review, fuzz).
  withdrawal_address: Type.String({
    minLength: 1,
    maxLength: 200,
    pattern: '^[\\x21-\\x7E]+$',
    description: 'an address of the underlying’s network: printable ASCII, no spaces',
  }),
  // A tag or memo goes with the funds too (an XRP tag, an XLM or EOS memo: memos are text, spaces inside and any
  // script allowed), and a blank, a tab or a right-to-left override was booked as one (review).
  destination_tag: Type.Optional(
    Type.String({ minLength: 1, maxLength: 100, pattern: VISIBLE_TEXT_PATTERN, description: VISIBLE_TEXT }),
  ),
  no_destination_tag: Type.Optional(Type.Boolean()),
  // Honoured: with `total`, total_notional equals the total, the network fee included.
  fee_inclusive: Type.Optional(Type.Boolean()),
  // The beneficiary of the withdrawal (travel-rule data for the vendor's compliance checks). This service
  // sends nothing on-chain and keeps no travel-rule records, so they are type-checked and not used.
  beneficiary_participant_code: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
  beneficiary_first_name: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
  beneficiary_last_name: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
  beneficiary_business_name: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
};

/** `GET /convert_withdraw/rfq` query. */
export const ConvertWithdrawQuoteRequest = Type.Object(convertWithdrawQuoteFields, {
  additionalProperties: false,
});
export type ConvertWithdrawQuoteRequest = Static<typeof ConvertWithdrawQuoteRequest>;

/** `POST /convert_withdraw/rfq` body (the vendor's PostCWRequestForQuoteBody). */
export const ConvertWithdrawQuoteBody = Type.Object(
  {
    ...convertWithdrawQuoteFields,
    fees: Type.Optional(Fees),
    payment_processor: Type.Optional(PaymentProcessor),
    // EVM smart-contract call metadata; no chain is connected (DESIGN §1), so it is accepted and not used.
    contract_execution: Type.Optional(
      Type.Object(
        {
          contract_id: Type.Optional(Type.String({ minLength: 3, maxLength: 200 })),
          contract_address: Type.Optional(Type.String({ minLength: 3, maxLength: 200 })),
          payload: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
        },
        { additionalProperties: false },
      ),
    ),
  },
  { additionalProperties: false },
);
export type ConvertWithdrawQuoteBody = Static<typeof ConvertWithdrawQuoteBody>;

export const OboParticipant = Type.Object({
  participant_code: Type.String(),
  account_group: Type.String(),
  account_label: Type.String(),
});

/** The vendor's liquidity quote (GetRequestForQuoteResponse.message, "RFQ Base Response"). */
export const LiquidityQuote = Type.Object({
  request_id: Type.String(),
  participant_code: Type.String({ description: 'the participant the quote was requested for' }),
  quoted_currency: Type.String(),
  side: Side,
  quantity: Type.String(),
  price: Type.String(),
  quote_id: Type.String(),
  expire_ts: Type.Integer({ description: 'epoch ms after which the quote cannot be executed' }),
  account_group: Type.String(),
  account_label: Type.String(),
  obo_participant: Type.Object(OboParticipant.properties, {
    description: 'whose account the trade settles on (the primary holder when a tenant asked)',
  }),
  total_notional: Type.String(),
  underlying: Type.String(),
  asset_cost_notional: Type.String(),
  spread_notional: Type.String(),
  spread_bps: Type.String(),
});
export type LiquidityQuote = Static<typeof LiquidityQuote>;

/** The vendor's CWQuoteEntity. */
export const ConvertWithdrawQuote = Type.Object({
  ...LiquidityQuote.properties,
  network_fee_notional: Type.String(),
  network_fee_quantity: Type.String(),
  withdrawal_fee_type: Type.Integer(),
  withdrawal_fee_tiers_list: Type.Array(Type.Object({})),
  withdrawal_address: Type.String(),
});
export type ConvertWithdrawQuote = Static<typeof ConvertWithdrawQuote>;

/**
 * A liquidity quote as `GET` and `POST /liquidity/rfq` answer it: with the vendor's settlement and issuer-fee fields,
 * which its GetRequestForQuoteResponse returns as `null` for "quotes without an explicit settlement override" and
 * "when no issuer fee is applied" (probe: they were left out, which a client testing for null reads otherwise). This
 * service applies no issuer fee; `settlement_type` echoes the one a `POST` names (STANDARD, the only settlement).
 */
export const RequestedLiquidityQuote = Type.Object({
  ...LiquidityQuote.properties,
  settlement_type: Type.Union([Type.Literal('STANDARD'), Type.Null()]),
  issuer_fee_payor_type: Type.Null(),
  issuer_fee_rate: Type.Null(),
  issuer_fee_amount: Type.Null(),
});
export type RequestedLiquidityQuote = Static<typeof RequestedLiquidityQuote>;

export const LiquidityQuoteResponse = Envelope(RequestedLiquidityQuote);
export const ConvertWithdrawQuoteResponse = Envelope(ConvertWithdrawQuote);

/**
 * The vendor's ACH funding details of an execution. This service has no ACH (trades settle on the
 * participant's balance), so they are type-checked and not used.
 */
const FundingDetails = Type.Union([
  Type.Object(
    { inbound_reference_id: Type.String({ minLength: 1, maxLength: 200 }) },
    { additionalProperties: false },
  ),
  Type.Object(
    {
      external_account_id: Type.String({ minLength: 1, maxLength: 200 }),
      description: Type.String({ maxLength: 10 }),
      bank_fee: Type.String({ pattern: UNSIGNED_DECIMAL_PATTERN, description: 'decimal string' }),
    },
    { additionalProperties: false },
  ),
]);

const executeFields = {
  quote_id: Type.String({ minLength: 1, maxLength: 100 }),
  // Vendor: a withdrawal record created before the execution. This service creates the withdrawal request
  // with the trade (convert and withdraw) and has no other, so the id is type-checked and not used.
  withdrawal_request_id: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
  funding_details: Type.Optional(FundingDetails),
};

/** `POST /liquidity/execute` body (the vendor's PostExecuteQuoteBody). */
export const ExecuteQuoteBody = Type.Object(
  {
    ...executeFields,
    // Vendor: force an allocation even when the quote expired. Not honoured: wire-contract §7 makes an
    // expired quote a 404 and allows at most one trade per quote; type-checked and not used.
    always_allocate: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);
export type ExecuteQuoteBody = Static<typeof ExecuteQuoteBody>;

/** `POST /convert_withdraw/execute` body (the vendor's PostCWExecuteQuoteBody). */
export const ConvertWithdrawExecuteBody = Type.Object(executeFields, { additionalProperties: false });
export type ConvertWithdrawExecuteBody = Static<typeof ConvertWithdrawExecuteBody>;

const ExecutionStatus = Type.Enum(['Completed'] as const, {
  description: 'the trade was booked (accepted); settlement follows',
});

/** PostExecuteQuoteResponse.message */
export const LiquidityExecution = Type.Object({
  request_id: Type.String(),
  quote: LiquidityQuote,
  trade_id: Type.String(),
  trade_ids_list: Type.Array(Type.String()),
  status: ExecutionStatus,
});
export type LiquidityExecution = Static<typeof LiquidityExecution>;

/** PostCWExecuteQuoteResponse.message */
export const ConvertWithdrawExecution = Type.Object({
  request_id: Type.String(),
  quote: ConvertWithdrawQuote,
  trade_id: Type.String(),
  trade_ids_list: Type.Array(Type.String()),
  status: ExecutionStatus,
  withdrawal_request_id: Type.String(),
});
export type ConvertWithdrawExecution = Static<typeof ConvertWithdrawExecution>;

export const LiquidityExecutionResponse = Envelope(LiquidityExecution);
export const ConvertWithdrawExecutionResponse = Envelope(ConvertWithdrawExecution);
