/**
 * A lone UTF-16 surrogate (JSON's `"\ud800"`): it has no UTF-8 form (PostgreSQL would store U+FFFD) and no
 * canonical JSON form (RFC 8785).
 */
const LONE_SURROGATE = /[\uD800-\uDBFF](?![\uDC00-\uDFFF])|(?<![\uD800-\uDBFF])[\uDC00-\uDFFF]/;

export function hasLoneSurrogate(text: string): boolean {
  return LONE_SURROGATE.test(text);
}
