import { QUOTE_EXPIRY_WINDOWS_MS } from '../../contract/wire-values.ts';
import {
  type ConvertWithdrawExecution,
  type ConvertWithdrawQuote,
  type ConvertWithdrawQuoteBody,
  type LiquidityExecution,
  type LiquidityQuote,
  type LiquidityQuoteBody,
  type RequestedLiquidityQuote,
} from '../../contract/quotes.schemas.ts';
import { Dec, toDecimalString } from '../../lib/decimal.ts';
import { newUuid } from '../../lib/ids.ts';
import type { QuoteKind } from '../../store/tables/trades.tables.ts';
import type { DomainDeps } from '../deps.ts';
import { faultsBeforeRefusal, forbidden, invalid, notFound } from '../errors.ts';
import { findPlatform } from '../platforms/platforms.repository.ts';
import { findPrice, isQuotedCurrency } from '../prices/prices.service.ts';
import { bookTrade, isUuid, resolveTradingHolder } from '../trades/trades.service.ts';
import { networkAssetProblem } from './network-assets.ts';
import { ledgerAsset, priceQuote } from './pricing.ts';
import {
  claimQuoteForExecution,
  deleteUnexecutedQuotesExpiredBefore,
  insertQuote,
  type QuoteRow,
} from './quotes.repository.ts';

/**
 * Liquidity and convert-and-withdraw quotes (spec 4.6, 7.2; wire-contract §7): a quote is priced from the
 * operator's price source, lives for the platform's quote expiry, and can be executed once, into one trade
 * whose client_trade_id is the quote_id. Unknown, expired, already executed or another platform's quotes
 * are all "not found" (404), which is what spec 7.2's recovery relies on.
 */

/** Convert and withdraw: the withdrawal's network fee. No chain is connected (DESIGN §1), so it is zero. */
const NETWORK_FEE = '0';

/** The hourly job that purges quotes expired without execution (migration 0010). */
export const PURGE_QUOTES_TASK = 'quotes.purge_expired';
/** How long an unexecuted quote is kept after its expiry (for the operator's eyes in the database). */
export const QUOTE_RETENTION_MS = 24 * 60 * 60_000;
const PURGE_BATCH = 5_000;

/**
 * Either kind's request, query or body. Fields of the vendor's shapes that this service does not use (fees,
 * payment processor, beneficiary, …) are accepted by the contract and not read here; see quotes.schemas.ts.
 */
type QuoteRequest = LiquidityQuoteBody &
  Partial<
    Pick<
      ConvertWithdrawQuoteBody,
      'withdrawal_address' | 'destination_tag' | 'no_destination_tag' | 'fee_inclusive'
    >
  >;

export function liquidityQuoteView(row: QuoteRow): LiquidityQuote {
  return {
    request_id: row.request_id,
    participant_code: row.participant_code,
    quoted_currency: row.quoted_currency,
    side: row.side,
    quantity: toDecimalString(row.quantity),
    price: toDecimalString(row.price),
    quote_id: row.quote_id,
    expire_ts: row.expire_at.getTime(),
    // The platform's code is the account group of its participants' accounts.
    account_group: row.platform_code,
    account_label: row.account_label,
    obo_participant: {
      participant_code: row.owner_participant_code,
      account_group: row.platform_code,
      account_label: row.account_label,
    },
    total_notional: toDecimalString(row.total_notional),
    underlying: row.underlying,
    asset_cost_notional: toDecimalString(row.asset_cost_notional),
    spread_notional: toDecimalString(row.spread_notional),
    spread_bps: toDecimalString(row.spread_bps),
  };
}

export function convertWithdrawQuoteView(row: QuoteRow): ConvertWithdrawQuote {
  return {
    ...liquidityQuoteView(row),
    network_fee_notional: toDecimalString(row.network_fee_notional ?? NETWORK_FEE),
    network_fee_quantity: toDecimalString(row.network_fee_quantity ?? NETWORK_FEE),
    // Vendor: 0 = flat fee schedule, with an empty tier list.
    withdrawal_fee_type: 0,
    withdrawal_fee_tiers_list: [],
    withdrawal_address: row.withdrawal_address ?? '',
  };
}

/** What an execution returns, for either kind: the quote as `view` shows it and its one trade. */
function executionView<Q>(quote: QuoteRow, trade: { trade_id: string }, view: (row: QuoteRow) => Q) {
  return {
    request_id: quote.request_id,
    quote: view(quote),
    trade_id: trade.trade_id,
    trade_ids_list: [trade.trade_id],
    status: 'Completed' as const,
  };
}

export function createQuotesService(deps: DomainDeps) {
  const { db, clock, config } = deps;

  /** Validates and prices a request, collecting every problem so a 400 names each bad field. */
  async function createQuote(platformCode: string, kind: QuoteKind, input: QuoteRequest): Promise<QuoteRow> {
    const errors: string[] = [];
    if (input.quantity === undefined && input.total === undefined) {
      errors.push('quantity: exactly one of quantity and total is required');
    }
    if (input.quantity !== undefined && input.total !== undefined) {
      errors.push('total: exactly one of quantity and total may be given, not both');
    }
    for (const field of ['quantity', 'total'] as const) {
      const value = input[field];
      if (value !== undefined && !new Dec(value).gt(0)) errors.push(`${field}: must be greater than 0`);
    }
    // The vendor's commission and custom fees are features of some platforms; no platform here has them. Money
    // the platform means to charge is refused by name rather than silently not charged.
    if (input.commission !== undefined) {
      errors.push('commission: not available on this service (quotes carry a spread only)');
    }
    if (input.fees?.length) {
      errors.push('fees: not available on this service (quotes carry no custom fees)');
    }
    const platform = await findPlatform(db, platformCode);
    // The vendor gates the window per platform (its OpenAPI: "Feature-flag gated per platform"): a quote held 15
    // minutes is an option on the price source, which the operator may refuse (review). A fault of the input, as the
    // commission is: named with the others, before a refusal of who acts.
    if (input.quote_expiry !== undefined && platform?.quote_expiry_requests === false)
      errors.push(
        "quote_expiry: this platform's quotes expire after its own window; the operator turned quote_expiry off for it (quote_expiry_requests)",
      );
    const unknownNetwork = networkAssetProblem('underlying', input.underlying);
    if (unknownNetwork) errors.push(unknownNetwork);
    const asset = ledgerAsset(input.underlying);
    if (asset === input.quoted_currency) errors.push('quoted_currency: must differ from the underlying');
    if (kind === 'convert_withdraw') {
      // The bought underlying is what is withdrawn on-chain; a sale would leave fiat to send to an address.
      if (input.side !== 'buy')
        errors.push('side: convert and withdraw only buys (the bought asset is withdrawn)');
      if (input.destination_tag !== undefined && input.no_destination_tag === true) {
        errors.push('destination_tag: must not be given with no_destination_tag=true');
      }
    }
    // wire-contract §9: the input's faults (400) are reported before a refusal of who acts (a former tenant's 403).
    const {
      value: holder,
      problems,
      refusal,
    } = await faultsBeforeRefusal(
      resolveTradingHolder(db, platformCode, input.participant_code, input.account_label),
    );
    errors.push(...problems);
    const sourcePrice = await findPrice(db, asset, input.quoted_currency);
    // Issue 7: a pair without a price cannot be quoted. Named by the field that is at fault: a currency nothing is
    // priced in is the quoted currency's (probe: `quoted_currency: "0"` blamed the underlying).
    if (sourcePrice === null) {
      const field = (await isQuotedCurrency(db, input.quoted_currency)) ? 'underlying' : 'quoted_currency';
      errors.push(`${field}: no price for ${asset}/${input.quoted_currency}`);
    }
    if (errors.length || sourcePrice === null) throw invalid(...errors);
    const spreadBps = toDecimalString(input.spread ?? '0');
    const priced = priceQuote({
      side: input.side,
      sourcePrice,
      spreadBps,
      quantity: input.quantity,
      total: input.total,
      networkFeeNotional: kind === 'convert_withdraw' ? NETWORK_FEE : undefined,
      feeInclusive: input.fee_inclusive === true,
    });
    // Amounts the price makes impossible are faults of the input too: before the refusal (review).
    if ('problem' in priced) throw invalid(`${priced.field}: ${priced.problem}`);
    if (refusal) throw refusal;
    if (!holder) throw invalid(...errors);

    // The request's vendor `quote_expiry` window, else (wire-contract §7) the platform's own expiry, else the
    // default (30 s).
    const expiryMs =
      input.quote_expiry !== undefined
        ? QUOTE_EXPIRY_WINDOWS_MS[input.quote_expiry]
        : (platform?.quote_expiry_ms ?? config.quoteExpiryMs);
    const now = clock.now();
    return insertQuote(db, {
      quote_id: newUuid(),
      request_id: newUuid(),
      platform_code: platformCode,
      kind,
      participant_code: holder.actingParticipantCode,
      owner_participant_code: holder.ownerParticipantCode,
      account_label: holder.accountLabel,
      zrn: holder.zrn,
      side: input.side,
      underlying: input.underlying,
      quoted_currency: input.quoted_currency,
      quantity: priced.quantity,
      price: priced.price,
      source_price: sourcePrice,
      total_notional: priced.totalNotional,
      asset_cost_notional: priced.assetCostNotional,
      spread_bps: spreadBps,
      spread_notional: priced.spreadNotional,
      network_fee_notional: kind === 'convert_withdraw' ? NETWORK_FEE : null,
      network_fee_quantity: kind === 'convert_withdraw' ? NETWORK_FEE : null,
      withdrawal_address: kind === 'convert_withdraw' ? input.withdrawal_address! : null,
      destination_tag: input.destination_tag ?? null,
      no_destination_tag: input.no_destination_tag ?? null,
      created_at: new Date(now),
      expire_at: new Date(now + expiryMs),
    });
  }

  /** Executes a quote into one trade, atomically (wire-contract §7); anything else is 404. */
  async function executeQuote(platformCode: string, kind: QuoteKind, quoteId: string) {
    // wire-contract §9: a quote_id that is not the caller's is unknown; one that is not even a UUID too.
    if (!isUuid(quoteId)) throw notFound();
    return db.transaction().execute(async (trx) => {
      const quote = await claimQuoteForExecution(
        trx,
        platformCode,
        kind,
        quoteId,
        () => new Date(clock.now()),
      );
      if (!quote) throw notFound();
      // A quote can be executed for minutes: whoever it was for must still be allowed to trade on that
      // account now (a tenant since removed, a participant since locked or closed, a holder since locked),
      // with the same 400 or 403 that a new quote would get, naming the quote (the request names nothing
      // else). A refusal rolls the claim back.
      const now = await resolveTradingHolder(
        trx,
        platformCode,
        quote.participant_code,
        quote.account_label,
        'quote_id',
      );
      // The owner, not the zrn: a customer account opened since under the same label is the same balances.
      if (now.ownerParticipantCode !== quote.owner_participant_code) {
        throw forbidden(
          `participant ${quote.participant_code} no longer acts for the account the quote was made for`,
        );
      }
      const trade = await bookTrade(deps, trx, {
        platformCode,
        holder: {
          actingParticipantCode: quote.participant_code,
          ownerParticipantCode: quote.owner_participant_code,
          accountLabel: quote.account_label,
          zrn: quote.zrn,
        },
        source: kind,
        netSettlement: false,
        // wire-contract §7, spec 7.2: GET /trades?client_trade_id=<quote_id> finds the trade.
        clientTradeId: quote.quote_id,
        quoteId: quote.quote_id,
        side: quote.side,
        underlying: quote.underlying,
        quotedCurrency: quote.quoted_currency,
        price: toDecimalString(quote.price),
        quantity: toDecimalString(quote.quantity),
        totalNotional: toDecimalString(quote.total_notional),
        assetCostNotional: toDecimalString(quote.asset_cost_notional),
        spreadBps: toDecimalString(quote.spread_bps),
        spreadNotional: toDecimalString(quote.spread_notional),
        networkFeeNotional: quote.network_fee_notional,
        networkFeeQuantity: quote.network_fee_quantity,
        comment: null,
        withdrawal:
          kind === 'convert_withdraw'
            ? {
                address: quote.withdrawal_address!,
                destinationTag: quote.destination_tag,
                noDestinationTag: quote.no_destination_tag,
              }
            : null,
        fundsField: 'quote_id',
        // As the claim found the quote unexpired: a time read after the waits since (the balance's lock) could
        // fall after the quote's expire_ts (probe: 2 ms), a trade booked on an expired quote to whoever
        // reconciles the two.
        at: quote.executed_at!.getTime(),
      });
      return { quote, trade };
    });
  }

  return {
    /**
     * Deletes the quotes that expired more than QUOTE_RETENTION_MS ago without being executed, in batches;
     * returns how many. Every RFQ writes a quote, so without it the table only grows.
     */
    async purgeExpired(): Promise<number> {
      const before = new Date(clock.now() - QUOTE_RETENTION_MS);
      let purged = 0;
      for (;;) {
        const deleted = await deleteUnexecutedQuotesExpiredBefore(db, before, PURGE_BATCH);
        purged += deleted;
        if (deleted < PURGE_BATCH) return purged;
      }
    },

    /** `GET|POST /liquidity/rfq` */
    async requestLiquidityQuote(
      platformCode: string,
      input: LiquidityQuoteBody,
    ): Promise<RequestedLiquidityQuote> {
      return {
        ...liquidityQuoteView(await createQuote(platformCode, 'liquidity', input)),
        settlement_type: input.settlement_type ?? null,
        issuer_fee_payor_type: null,
        issuer_fee_rate: null,
        issuer_fee_amount: null,
      };
    },

    /** `GET|POST /convert_withdraw/rfq` */
    async requestConvertWithdrawQuote(
      platformCode: string,
      input: ConvertWithdrawQuoteBody,
    ): Promise<ConvertWithdrawQuote> {
      return convertWithdrawQuoteView(await createQuote(platformCode, 'convert_withdraw', input));
    },

    /** `POST /liquidity/execute` */
    async executeLiquidityQuote(platformCode: string, quoteId: string): Promise<LiquidityExecution> {
      const { quote, trade } = await executeQuote(platformCode, 'liquidity', quoteId);
      return executionView(quote, trade, liquidityQuoteView);
    },

    /** `POST /convert_withdraw/execute`: the trade and its withdrawal request. */
    async executeConvertWithdrawQuote(
      platformCode: string,
      quoteId: string,
    ): Promise<ConvertWithdrawExecution> {
      const { quote, trade } = await executeQuote(platformCode, 'convert_withdraw', quoteId);
      return {
        ...executionView(quote, trade, convertWithdrawQuoteView),
        withdrawal_request_id: trade.withdrawal_request_id!,
      };
    },
  };
}

export type QuotesService = ReturnType<typeof createQuotesService>;
