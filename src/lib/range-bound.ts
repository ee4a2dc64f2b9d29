/**
 * Range filters on whole-millisecond timestamps whose bound may have a fraction (the vendor types them
 * numbers, and a client computing `time.time() * 1000` sends one), made exact without binary floats: near
 * 1.7e12 a double cannot tell `T.0001` from `T`, and `T.0001` is after `T`.
 */
export type RangeOp = 'gt' | 'gte' | 'lt' | 'lte';

/** A non-negative decimal numeral's integer part, and whether any fraction follows it (`"12.50"`: 12n, true). */
export function splitDecimal(text: string): { integer: bigint; fractional: boolean } {
  const [integer = '0', fraction = ''] = text.split('.');
  return { integer: BigInt(integer), fractional: /[1-9]/.test(fraction) };
}

/**
 * The whole bound equivalent to `op value` for a value whose floor is `floor`: "after 1.5" is "after 1", "at or
 * after 1.5" is "at or after 2", "before 1.5" is "before 2", "at or before 1.5" is "at or before 1".
 */
export function wholeBound(floor: bigint, whole: boolean, op: RangeOp): bigint {
  return op === 'gt' || op === 'lte' || whole ? floor : floor + 1n;
}
