/**
 * Range filters on whole-millisecond timestamps whose bound may have a fraction (the vendor types them
 * numbers, and a client computing `time.time() * 1000` sends one), made exact without binary floats: near
 * 1.7e12 a double cannot tell `T.0001` from `T`, and `T.0001` is after `T`.
 */
export type RangeOp = 'gt' | 'gte' | 'lt' | 'lte';

/**
 * A non-negative decimal numeral's integer part, and whether any fraction follows it (`"12.50"`: 12n, true),
 * exactly. The numeral may have an exponent (`"1.7953446824844147e+18"`: how Python and JavaScript print a
 * float of nanoseconds), which moves the point among its digits.
 */
export function splitDecimal(text: string): { integer: bigint; fractional: boolean } {
  const [mantissa = '0', exponent = '0'] = text.toLowerCase().split('e');
  const [whole = '0', fraction = ''] = mantissa.split('.');
  const digits = whole + fraction;
  const point = whole.length + Number(exponent);
  if (point <= 0) return { integer: 0n, fractional: /[1-9]/.test(digits) };
  if (point >= digits.length) return { integer: BigInt(digits.padEnd(point, '0')), fractional: false };
  return { integer: BigInt(digits.slice(0, point)), fractional: /[1-9]/.test(digits.slice(point)) };
}

/**
 * The whole bound equivalent to `op value` for a value whose floor is `floor`: "after 1.5" is "after 1", "at or
 * after 1.5" is "at or after 2", "before 1.5" is "before 2", "at or before 1.5" is "at or before 1".
 */
export function wholeBound(floor: bigint, whole: boolean, op: RangeOp): bigint {
  return op === 'gt' || op === 'lte' || whole ? floor : floor + 1n;
}
