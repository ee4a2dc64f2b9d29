/**
 * The written form of a decimal on the wire, apart from decimal.js (decimal.ts), so that the CLI can check an
 * option's form without loading the library it does no arithmetic with.
 */
export const DECIMAL_PATTERN = '^-?(0|[1-9][0-9]*)(\\.[0-9]+)?$';
/** DECIMAL_PATTERN without the sign. */
export const NON_NEGATIVE_DECIMAL_PATTERN = '^(0|[1-9][0-9]*)(\\.[0-9]+)?$';
