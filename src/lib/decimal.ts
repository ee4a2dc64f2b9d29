import { Decimal } from 'decimal.js';

/**
 * Money and quantities are decimal strings on the wire and numeric in PostgreSQL; arithmetic goes through
 * decimal.js (a maintained arbitrary-precision library) so no binary float ever touches an amount.
 */
export const Dec = Decimal.clone({ precision: 60, rounding: Decimal.ROUND_HALF_EVEN });
export type Dec = Decimal;

/**
 * For sums and differences that must never round: balances and what moves them. 200 significant digits hold
 * any sum of amounts the API accepts (at most 64 characters each, so ~130 digits from the largest integer
 * part to the smallest fraction), where `Dec`'s 60 rounded a balance away from the sum of its movements.
 */
export const Exact = Decimal.clone({ precision: 200, rounding: Decimal.ROUND_HALF_EVEN });

import { DECIMAL_PATTERN } from './decimal-form.ts';

export { DECIMAL_PATTERN, NON_NEGATIVE_DECIMAL_PATTERN } from './decimal-form.ts';
const DECIMAL_RE = new RegExp(DECIMAL_PATTERN);

export function isDecimalString(value: string): boolean {
  return DECIMAL_RE.test(value);
}

/** Canonical wire form: no exponent, no trailing zeros after the point. */
export function toDecimalString(value: Decimal.Value): string {
  const d = new Dec(value);
  return d.isZero() ? '0' : d.toFixed();
}
