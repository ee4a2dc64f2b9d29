import { Type } from 'typebox';
import { REGIONS, type Region } from './wire-values.ts';

/** wire-contract §4: customer account resource names and participant codes. */

export const ZRN_PATTERN = `^zrn:svc:(${REGIONS.join('|')}):account:customer:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`;

export function makeZrn(region: Region, uuid: string): string {
  return `zrn:svc:${region}:account:customer:${uuid.toLowerCase()}`;
}

export const GENERATED_CODE_PATTERN = '^[A-Z0-9]{6}$';

/** A platform or participant code this service generated, as a request field or parameter. */
export const GeneratedCode = Type.String({
  pattern: GENERATED_CODE_PATTERN,
  description: '6-character code',
});
/**
 * A participant reference in a platform's request, wire-contract §4: 1–6 characters of [A-Za-z0-9_-] (the vendor's
 * add-tenant schema). Length and characters are separate keywords, so that a 400 says which one failed; the
 * accounts schemas wrote it so, the quotes' and funding's as one pattern, and the same code got two 400s (review).
 */
export const ParticipantCodeRef = Type.String({
  minLength: 1,
  maxLength: 6,
  // `*`, not `+`: an empty code is said once, by minLength (review).
  pattern: '^[A-Za-z0-9_-]*$',
  description: 'participant code, 1 to 6 characters of [A-Za-z0-9_-]',
});
/** wire-contract §4: the remove-tenant path's `tenant`, exactly 6 of those characters. */
export const TenantCode = Type.String({
  minLength: 6,
  maxLength: 6,
  pattern: '^[A-Za-z0-9_-]*$',
  description: 'participant code of the tenant, exactly 6 characters',
});
