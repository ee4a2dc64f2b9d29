import type { FastifyInstance, FastifyRequest } from 'fastify';
import { invalid } from '../../domain/errors.ts';
import './../request-context.ts';

/**
 * Keeps the raw body bytes for signature checks and parses JSON without failing the request: a malformed
 * body is answered 400 only after authentication, per the order of checks in wire-contract §9.
 * Every content type is read as JSON, as the vendor's API does.
 */
export function installRawBodyParser(app: FastifyInstance): void {
  app.decorateRequest('rawBody', undefined);
  app.decorateRequest('bodyError', null);
  // Every content type is read as JSON, so a Content-Type that is no media type at all ("json", "") is too:
  // Fastify would refuse it with 415 before authentication, against the order of checks.
  app.addHook('onRequest', (request, _reply, done) => {
    const type = request.headers['content-type'];
    if (type !== undefined && !MEDIA_TYPE.test(type)) request.headers['content-type'] = 'application/json';
    done();
  });
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (request, body, done) => {
    const raw = body as Buffer;
    request.rawBody = raw;
    if (raw.length === 0) return done(null, undefined);
    if (nestingDepthExceeds(raw, MAX_BODY_DEPTH)) {
      request.bodyError = `body: is nested more than ${MAX_BODY_DEPTH} levels deep`;
      return done(null, undefined);
    }
    try {
      done(null, JSON.parse(raw.toString('utf8')));
    } catch {
      request.bodyError = 'body: is not valid JSON';
      done(null, undefined);
    }
  });
}

/** A type/subtype media type, as Fastify tells one (lib/content-type.js): token "/" token, then parameters. */
const MEDIA_TYPE = /^\s*[\w!#$%&'*+.^`|~-]+\/[\w!#$%&'*+.^`|~-]+\s*(;|$)/;

/**
 * Deepest nesting of objects and arrays a body may have. The vendor's bodies go three levels deep; the
 * checks that walk a body (NUL characters here, canonical JSON and Unicode checks in onboarding) recurse,
 * and a body nested thousands of levels deep overflowed their stack (a 500).
 */
export const MAX_BODY_DEPTH = 32;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;

/**
 * Whether the JSON text nests objects and arrays more than `max` deep, by one pass over its bytes
 * (brackets inside strings do not count; in UTF-8 a quote or backslash byte is always that character).
 * Ours, not a library's: it is the bracket count a parser keeps, without building the value.
 */
function nestingDepthExceeds(raw: Buffer, max: number): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < raw.length; i++) {
    const byte = raw[i]!;
    if (inString) {
      if (byte === BACKSLASH) i++;
      else if (byte === QUOTE) inString = false;
    } else if (byte === QUOTE) {
      inString = true;
    } else if (byte === OPEN_BRACE || byte === OPEN_BRACKET) {
      if (++depth > max) return true;
    } else if (byte === CLOSE_BRACE || byte === CLOSE_BRACKET) {
      depth--;
    }
  }
  return false;
}

const NUL = '\u0000';

/** The first place in a JSON value where a string (key or value) holds NUL, as "<path>", or null. */
function nulPath(value: unknown, path: string): string | null {
  if (typeof value === 'string') return value.includes(NUL) ? path : null;
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = nulPath(value[i], `${path}[${i}]`);
      if (found !== null) return found;
    }
    return null;
  }
  if (value !== null && typeof value === 'object') {
    for (const [key, inner] of Object.entries(value)) {
      const name = path ? `${path}.${key}` : key;
      if (key.includes(NUL)) return name;
      const found = nulPath(inner, name);
      if (found !== null) return found;
    }
  }
  return null;
}

/**
 * Input checks that no route schema expresses, run after authentication (wire-contract §9): the body is
 * JSON (and not nested absurdly deep), and no text holds NUL, which PostgreSQL cannot store in `text` (it would fail in the database as
 * a 500 instead of a 400 naming the field).
 */
export function assertParsableInput(request: FastifyRequest): void {
  if (request.bodyError !== null) throw invalid(request.bodyError);
  for (const [part, value] of [
    ['params', request.params],
    ['query', request.query],
    ['body', request.body],
  ] as const) {
    const path = nulPath(value, '');
    if (path !== null) throw invalid(`${path || part}: must not contain the NUL character (\\u0000)`);
  }
}
