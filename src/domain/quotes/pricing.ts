import { Decimal } from 'decimal.js';
import { AMOUNT_DECIMALS, MAX_AMOUNT_LENGTH } from '../../contract/quotes.schemas.ts';
import { Exact, toDecimalString } from '../../lib/decimal.ts';
import type { Side } from '../../contract/wire-values.ts';

/**
 * Quote arithmetic, pure: decimal.js only, never a binary float (wire-contract §3). Every computed amount
 * has at most AMOUNT_DECIMALS places; where a value must be rounded, it is rounded in the house's favour
 * (what the participant pays up, what it receives down), so a quote never promises more than it books.
 * Products are exact (precision 200 exceeds any product of two bounded inputs); quotients are taken with
 * directed rounding so that the final rounding to AMOUNT_DECIMALS is an exact floor or ceiling.
 */
const Floor = Exact.clone({ rounding: Decimal.ROUND_FLOOR });
const Ceil = Exact.clone({ rounding: Decimal.ROUND_CEIL });
const BPS = 10_000;

export interface QuoteInput {
  side: Side;
  /** The price source's price of one unit of the underlying. */
  sourcePrice: string;
  /** Spread in basis points, 0 ≤ spread < 10000. */
  spreadBps: string;
  /** Exactly one of quantity (of the underlying) and total (in the quoted currency). */
  quantity?: string;
  total?: string;
  /** Convert and withdraw: the network fee in the quoted currency, paid on top (buy). */
  networkFeeNotional?: string;
  /**
   * Vendor `fee_inclusive` (by total only): the total is the total notional, fees included, so the asset
   * cost is the total less the fee (buy) or plus it (sell). Otherwise the fee comes on top of the total.
   */
  feeInclusive?: boolean;
}

export interface PricedQuote {
  price: string;
  quantity: string;
  /** What the participant pays (buy) or receives (sell), in the quoted currency, fees included. */
  totalNotional: string;
  /** The cost of the asset alone. */
  assetCostNotional: string;
  /** How much of the notional is the spread. */
  spreadNotional: string;
}

export type PricingProblem = { field: 'quantity' | 'total' | 'spread'; problem: string };

function up(value: Decimal): Decimal {
  return value.toDecimalPlaces(AMOUNT_DECIMALS, Decimal.ROUND_CEIL);
}
function down(value: Decimal): Decimal {
  return value.toDecimalPlaces(AMOUNT_DECIMALS, Decimal.ROUND_FLOOR);
}

export function priceQuote(input: QuoteInput): PricedQuote | PricingProblem {
  const buy = input.side === 'buy';
  const house = buy ? up : down;
  const spread = new Exact(input.spreadBps).div(BPS);
  const price = house(new Exact(input.sourcePrice).times(buy ? spread.plus(1) : new Exact(1).minus(spread)));
  // Only the spread can (a sell at a tiny price): named as the cause, whichever amount was asked for (review).
  if (!price.gt(0))
    return { field: 'spread', problem: `leaves no positive price (from ${input.sourcePrice})` };

  const fee = new Exact(input.networkFeeNotional ?? 0);
  let quantity: Decimal;
  let assetCost: Decimal;
  if (input.quantity !== undefined) {
    quantity = new Exact(input.quantity);
    assetCost = house(quantity.times(price));
    if (!assetCost.gt(0)) {
      return { field: 'quantity', problem: `too small: it is worth less than 1e-${AMOUNT_DECIMALS}` };
    }
  } else {
    // By total: the participant spends (buy) or receives (sell) exactly the total; the quantity is what
    // that buys (rounded down) or what must be sold for it (rounded up).
    assetCost = new Exact(input.total!);
    if (input.feeInclusive) {
      assetCost = buy ? assetCost.minus(fee) : assetCost.plus(fee);
      if (!assetCost.gt(0)) return { field: 'total', problem: 'does not cover the network fee' };
    }
    quantity = buy ? down(new Floor(assetCost).div(price)) : up(new Ceil(assetCost).div(price));
    if (!quantity.gt(0)) {
      return {
        field: 'total',
        problem: `too small to ${input.side} any of the underlying at ${price.toFixed()}`,
      };
    }
  }
  const totalNotional = buy ? assetCost.plus(fee) : assetCost.minus(fee);
  if (!totalNotional.gt(0)) return { field: 'quantity', problem: 'does not cover the network fee' };
  // What the spread moved the price by, on the quantity: none without a spread. (Not the asset cost less the
  // quantity at the source price: by total, that also counted the quantity's rounding as spread.)
  const spreadNotional = quantity.times(price.minus(input.sourcePrice)).abs();

  const result: PricedQuote = {
    price: toDecimalString(price),
    quantity: toDecimalString(quantity),
    totalNotional: toDecimalString(totalNotional),
    assetCostNotional: toDecimalString(assetCost),
    spreadNotional: toDecimalString(up(spreadNotional)),
  };
  const field = input.quantity !== undefined ? 'quantity' : 'total';
  // Named by what came out too long: the quantity asked for can be small and its total, at a huge price, not.
  for (const [amount, name] of [
    [result.quantity, 'quantity'],
    [result.totalNotional, 'total'],
  ] as const) {
    if (amount.length > MAX_AMOUNT_LENGTH) {
      return {
        field,
        problem: `too large: the ${name} at ${result.price} would be ${amount.length} characters; amounts are at most ${MAX_AMOUNT_LENGTH}`,
      };
    }
  }
  return result;
}

/** Notional of an operator-booked trade at a given price, rounded like a quote by quantity. */
export function notionalAt(side: Side, quantity: string, price: string): string {
  const value = new Exact(quantity).times(price);
  return toDecimalString(side === 'buy' ? up(value) : down(value));
}

/** The ledger holds an asset without its network: `USDC.ETH` settles on the `USDC` balance. */
export function ledgerAsset(asset: string): string {
  return asset.split('.', 1)[0]!;
}
