import { Type } from 'typebox';
import { REGIONS, type Region } from './wire-values.ts';

/** wire-contract §4: customer account resource names and participant codes. */

export const ZRN_PATTERN = `^zrn:svc:(${REGIONS.join('|')}):account:customer:[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`;

export function makeZrn(region: Region, uuid: string): string {
  return `zrn:svc:${region}:account:customer:${uuid.toLowerCase()}`;
}

/** Add-tenant body and other participant references: 1–6 chars of [A-Za-z0-9_-]. */
export const PARTICIPANT_CODE_PATTERN = '^[A-Za-z0-9_-]{1,6}$';
/** Remove-tenant path parameter: exactly 6 chars. */
export const TENANT_PATH_PATTERN = '^[A-Za-z0-9_-]{6}$';
export const GENERATED_CODE_PATTERN = '^[A-Z0-9]{6}$';

/** A platform or participant code this service generated, as a request field or parameter. */
export const GeneratedCode = Type.String({
  pattern: GENERATED_CODE_PATTERN,
  description: '6-character code',
});
/** A participant reference in a platform's request (PARTICIPANT_CODE_PATTERN). */
export const ParticipantCodeRef = Type.String({
  pattern: PARTICIPANT_CODE_PATTERN,
  description: 'participant code, 1 to 6 characters of [A-Za-z0-9_-]',
});
