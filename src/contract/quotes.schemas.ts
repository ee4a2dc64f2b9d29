import { Type, type Static } from 'typebox';
import { Envelope } from './responses.ts';
import { PARTICIPANT_CODE_PATTERN } from './identifiers.ts';

/**
 * Liquidity and convert-and-withdraw quotes (spec 4.6, wire-contract §7), in the vendor's shapes
 * (PostRequestForQuoteBody, GetRequestForQuoteResponse, PostExecuteQuoteBody, PostExecuteQuoteResponse,
 * PostCWRequestForQuoteBody, CWQuoteEntity, PostCWExecuteQuoteBody, PostCWExecuteQuoteResponse).
 * Shared by the routes and the SDK.
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

export const SIDES = ['buy', 'sell'] as const;
export type Side = (typeof SIDES)[number];

const Amount = Type.String({ pattern: AMOUNT_PATTERN, description: 'positive decimal string' });
const Side = Type.Enum(SIDES, { description: "the participant's side" });
const Underlying = Type.String({
  pattern: UNDERLYING_PATTERN,
  description: 'the underlying asset, e.g. BTC',
});
const QuotedCurrency = Type.String({ pattern: CURRENCY_PATTERN, description: 'the quoted asset, e.g. USD' });
const ParticipantCode = Type.String({
  pattern: PARTICIPANT_CODE_PATTERN,
  description: 'the participant the quote is for; default: the platform itself',
});
const AccountLabel = Type.String({
  minLength: 1,
  maxLength: 100,
  description: "the account that funds the trade; default 'general'",
});
const Spread = Type.String({ pattern: SPREAD_PATTERN, description: 'spread in basis points' });

const liquidityQuoteFields = {
  side: Side,
  underlying: Underlying,
  quoted_currency: QuotedCurrency,
  quantity: Type.Optional(Amount),
  total: Type.Optional(Amount),
  participant_code: Type.Optional(ParticipantCode),
  account_label: Type.Optional(AccountLabel),
  spread: Type.Optional(Spread),
};

/** `GET /liquidity/rfq` query and `POST /liquidity/rfq` body; exactly one of quantity and total. */
export const LiquidityQuoteRequest = Type.Object(liquidityQuoteFields, { additionalProperties: false });
export type LiquidityQuoteRequest = Static<typeof LiquidityQuoteRequest>;

/** `GET /convert_withdraw/rfq` query and `POST /convert_withdraw/rfq` body. */
export const ConvertWithdrawQuoteRequest = Type.Object(
  {
    ...liquidityQuoteFields,
    withdrawal_address: Type.String({ minLength: 1, maxLength: 200 }),
    destination_tag: Type.Optional(Type.String({ minLength: 1, maxLength: 100 })),
    no_destination_tag: Type.Optional(Type.Boolean()),
  },
  { additionalProperties: false },
);
export type ConvertWithdrawQuoteRequest = Static<typeof ConvertWithdrawQuoteRequest>;

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

export const LiquidityQuoteResponse = Envelope(LiquidityQuote);
export const ConvertWithdrawQuoteResponse = Envelope(ConvertWithdrawQuote);

/** `POST /liquidity/execute` and `POST /convert_withdraw/execute` body. */
export const ExecuteQuoteBody = Type.Object(
  { quote_id: Type.String({ minLength: 1, maxLength: 100 }) },
  { additionalProperties: false },
);
export type ExecuteQuoteBody = Static<typeof ExecuteQuoteBody>;

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
