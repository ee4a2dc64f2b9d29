import { SvcArgumentError } from './errors.ts';

/**
 * A value sent as one segment of a request path (a zrn, a trade id, an email, a participant code),
 * percent-encoded. `.` and `..` (and an empty value) are refused: `encodeURIComponent` leaves dots alone and
 * the URL parser would then drop or climb the segment, so the request would go to another route than the
 * one named, signed for a target it no longer has.
 */
export function pathSegment(value: string, name: string): string {
  // From JavaScript, or a cast: undefined went as `/accounts/undefined/details` (review).
  if (typeof value !== 'string')
    throw new SvcArgumentError(`${name}: must be a string, got ${value === null ? 'null' : typeof value}`);
  if (value === '' || value === '.' || value === '..') {
    throw new SvcArgumentError(`${name}: ${JSON.stringify(value)} cannot be sent as a path segment`);
  }
  return encodeURIComponent(value);
}
