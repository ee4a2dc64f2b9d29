import type { FastifyRequest } from 'fastify';

/** The most of a URL a log line holds: a 15,000-character query made every refused request a 15 KB line (log probe). */
export const MAX_LOGGED_URL_LENGTH = 512;
/** Parameters that carry a participant's personal data: not written to the logs (their requests are, by id). */
const PERSONAL = new Set(['email']);
const REDACTED = '[redacted]';

/**
 * A request's URL as its log line tells it: the values of personal parameters (a participant's email, in the path
 * of `GET /participants/{email}` or the query of the list) and of query parameters the route does not take (a token
 * a client put there by mistake) are `[redacted]`, and the whole is cut at MAX_LOGGED_URL_LENGTH characters.
 * The query's names stay, and so do the values the route takes (filters, pages), for following a client's calls.
 */
export function loggedUrl(request: FastifyRequest): string {
  const url = request.url;
  const queryAt = url.indexOf('?');
  const path = withoutPersonalSegments(queryAt === -1 ? url : url.slice(0, queryAt), request.params);
  const logged =
    queryAt === -1 ? path : `${path}?${loggedQuery(url.slice(queryAt + 1), takenQuery(request))}`;
  return logged.length <= MAX_LOGGED_URL_LENGTH
    ? logged
    : `${logged.slice(0, MAX_LOGGED_URL_LENGTH)}… (${logged.length} characters)`;
}

/** The path with each segment that is a personal parameter's value redacted. */
function withoutPersonalSegments(path: string, params: unknown): string {
  if (typeof params !== 'object' || params === null) return path;
  const values = Object.entries(params)
    .filter(([name, value]) => PERSONAL.has(name) && typeof value === 'string')
    .map(([, value]) => value as string);
  if (values.length === 0) return path;
  return path
    .split('/')
    .map((segment) => (values.includes(decoded(segment)) ? REDACTED : segment))
    .join('/');
}

/** The query parameters the route's schema takes. */
function takenQuery(request: FastifyRequest): ReadonlySet<string> {
  const schema = request.routeOptions.schema?.querystring as { properties?: object } | undefined;
  return new Set(Object.keys(schema?.properties ?? {}));
}

/** The query as sent, but for the values of personal parameters and of those the route does not take. */
function loggedQuery(query: string, taken: ReadonlySet<string>): string {
  return query
    .split('&')
    .map((pair) => {
      const equalsAt = pair.indexOf('=');
      // A bare word (`?abc`) may be a value too (a token without its name).
      if (equalsAt === -1) return pair === '' || taken.has(decoded(pair)) ? pair : REDACTED;
      const name = decoded(pair.slice(0, equalsAt).replaceAll('+', ' '));
      return taken.has(name) && !PERSONAL.has(name) ? pair : `${pair.slice(0, equalsAt)}=${REDACTED}`;
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
