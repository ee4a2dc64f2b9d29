import type { FastifyRequest } from 'fastify';

/** The most of a URL a log line holds: a 15,000-character query made every refused request a 15 KB line (log probe). */
export const MAX_LOGGED_URL_LENGTH = 512;
/**
 * Query parameters that carry a person's data: a participant's email, a beneficiary's names, a withdrawal or deposit
 * address.
 * Their values are not written to the logs (their requests are, with the rest of their URL).
 */
const PERSONAL = new Set([
  'email',
  'beneficiary_first_name',
  'beneficiary_last_name',
  'beneficiary_business_name',
  'withdrawal_address',
  'deposit_address',
]);
const REDACTED = '[redacted]';

/**
 * A request's URL as its log line tells it: a path segment or query value that holds an email (an `@`, however
 * encoded: `GET /participants/{email}`, matched or not), the values of personal parameters, and those of query
 * parameters the route does not take (a token a client put there by mistake) are `[redacted]`, and the whole is
 * cut at MAX_LOGGED_URL_LENGTH characters. The query's names stay, and so do the values the route takes (filters,
 * pages), for following a client's calls.
 */
export function loggedUrl(request: FastifyRequest): string {
  const url = request.url;
  const queryAt = url.indexOf('?');
  const path = withoutEmails(withoutPersonalParams(queryAt === -1 ? url : url.slice(0, queryAt)));
  const logged =
    queryAt === -1 ? path : `${path}?${loggedQuery(url.slice(queryAt + 1), takenQuery(request))}`;
  return logged.length <= MAX_LOGGED_URL_LENGTH
    ? logged
    : `${logged.slice(0, MAX_LOGGED_URL_LENGTH)}… (${logged.length} characters)`;
}

/**
 * Whether text holds an `@` (an email, or part of one), as is or percent-encoded once or more, whichever characters
 * are encoded (`%40`, `%2540`, `%25%34%30`): a client that encodes twice sends the router's second reading.
 */
function holdsEmail(text: string): boolean {
  let read = text;
  for (let round = 0; round < MAX_ENCODINGS; round += 1) {
    if (read.includes('@')) return true;
    if (!read.includes('%')) return false;
    // ASCII escapes only: a partial decoding that never throws (decodeURIComponent does on `%ZZ` and on UTF-8
    // split by an escape), and `@` is ASCII.
    const next = read.replace(ASCII_ESCAPE, (_, hex: string) => String.fromCharCode(parseInt(hex, 16)));
    if (next === read) return false;
    read = next;
  }
  // Past MAX_ENCODINGS, an `@` whose `%` alone was encoded again and again (`%2525252540`).
  return read.includes('@') || ENCODED_AT.test(read);
}
const ASCII_ESCAPE = /%([0-7][0-9a-f])/gi;
const ENCODED_AT = /%(25)*40/i;
/** How many encodings of any of an `@`'s characters are undone: more than any client applies by mistake. */
const MAX_ENCODINGS = 4;

/**
 * The path with each segment that holds an email redacted, whether or not a route took it: a 404's
 * (`/participants/a@b.example/`) or a malformed one's was logged as sent (review).
 */
function withoutEmails(path: string): string {
  if (!holdsEmail(path)) return path;
  return path
    .split('/')
    .map((segment) => (holdsEmail(segment) ? REDACTED : segment))
    .join('/');
}

/**
 * The path with the segment after each `deposit_addresses` redacted (`GET /admin/deposit_addresses/{address}`: a
 * person's deposit address), matched or not: a trailing or doubled slash, or a bad escape, answered 404 or 400 and
 * logged the address as sent (review).
 */
function withoutPersonalParams(path: string): string {
  if (!/deposit(_|%5f)addresses/i.test(path)) return path;
  const segments = path.split('/');
  let after = false;
  for (let i = 0; i < segments.length; i += 1) {
    if (after && segments[i] !== '') {
      segments[i] = REDACTED;
      after = false;
    } else if (decoded(segments[i]!).toLowerCase() === 'deposit_addresses') after = true;
  }
  return segments.join('/');
}

/** The query parameters each route's schema takes, found once per schema. */
const takenBySchema = new WeakMap<object, ReadonlySet<string>>();
const NONE_TAKEN: ReadonlySet<string> = new Set();

/** The query parameters the route's schema takes. */
function takenQuery(request: FastifyRequest): ReadonlySet<string> {
  const schema = request.routeOptions.schema?.querystring as { properties?: object } | undefined;
  if (schema === undefined) return NONE_TAKEN;
  let taken = takenBySchema.get(schema);
  if (taken === undefined) takenBySchema.set(schema, (taken = new Set(Object.keys(schema.properties ?? {}))));
  return taken;
}

/** The query as sent, but for the values of personal parameters and of those the route does not take. */
function loggedQuery(query: string, taken: ReadonlySet<string>): string {
  return query
    .split('&')
    .map((pair) => {
      const equalsAt = pair.indexOf('=');
      // A bare word (`?abc`) may be a value too (a token without its name).
      if (equalsAt === -1) return pair === '' || taken.has(decoded(pair)) ? pair : REDACTED;
      const rawName = pair.slice(0, equalsAt);
      // A name no route takes may be personal too (`?a@b.example=1`, review).
      if (holdsEmail(rawName)) return REDACTED;
      const name = decoded(rawName);
      const kept = taken.has(name) && !PERSONAL.has(name) && !holdsEmail(pair.slice(equalsAt + 1));
      return kept ? pair : `${rawName}=${REDACTED}`;
    })
    .join('&');
}

/** A path segment or query name as the router reads it; as written when it is no valid percent-encoding. */
function decoded(text: string): string {
  try {
    return decodeURIComponent(text);
  } catch {
    return text;
  }
}
