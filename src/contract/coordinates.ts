import { Dec } from '../lib/decimal.ts';

/**
 * A customer's `proof_of_address_coordinates` (vendor PostCustomersBody): each of `latitude` and `longitude` in
 * decimal degrees (`51.511164`) or in degrees, minutes and seconds (`N 51d 30.000000m 40.190000`), and "Values are
 * returned in DD format". The schema's pattern admits both forms; this reads one as a place on the globe and
 * writes it in decimal degrees, in decimal arithmetic (no binary float between what was sent and what is shown).
 */
export type CoordinateAxis = 'latitude' | 'longitude';

const DMS = /^([NSEW])\s+(\d+(?:\.\d+)?)d\s+(\d+(?:\.\d+)?)m\s+(\d+(?:\.\d+)?)$/;
const DD = /^-?\d+(?:\.\d+)?$/;
const LIMIT: Record<CoordinateAxis, number> = { latitude: 90, longitude: 180 };
const HEMISPHERES: Record<CoordinateAxis, string> = { latitude: 'NS', longitude: 'EW' };
/** The places of a converted value: the vendor's own example (`N 51d 30.000000m 40.190000` is `51.511164`). */
const DD_PLACES = 6;

export type CoordinateReading = { degrees: string } | { problem: string };

/**
 * `text` (already of the schema's pattern) in decimal degrees, or what is wrong with it: a value beyond ±90
 * (latitude) or ±180 (longitude), a hemisphere of the other axis, minutes or seconds of 60 or more. Decimal degrees
 * come back as sent; degrees, minutes and seconds as decimal degrees to 6 places (about 0.1 m).
 */
export function readCoordinate(text: string, axis: CoordinateAxis): CoordinateReading {
  const limit = LIMIT[axis];
  const outOfRange = { problem: `must be between -${limit} and ${limit} degrees` };
  if (DD.test(text)) return new Dec(text).abs().gt(limit) ? outOfRange : { degrees: text };
  const dms = DMS.exec(text);
  if (!dms) return { problem: 'must be decimal degrees (51.511164) or N|S|E|W 51d 30m 40.19' };
  const [, hemisphere, degrees, minutes, seconds] = dms as unknown as [
    string,
    string,
    string,
    string,
    string,
  ];
  if (!HEMISPHERES[axis].includes(hemisphere)) {
    return { problem: `takes ${HEMISPHERES[axis].split('').join(' or ')}, not ${hemisphere}` };
  }
  if (new Dec(minutes).gte(60) || new Dec(seconds).gte(60)) {
    return { problem: 'must have minutes and seconds below 60' };
  }
  const magnitude = new Dec(degrees).plus(new Dec(minutes).div(60)).plus(new Dec(seconds).div(3600));
  if (magnitude.gt(limit)) return outOfRange;
  const rounded = magnitude.toDecimalPlaces(DD_PLACES, Dec.ROUND_HALF_UP);
  const signed = (hemisphere === 'S' || hemisphere === 'W') && !rounded.isZero() ? rounded.neg() : rounded;
  return { degrees: signed.toFixed(DD_PLACES) };
}
