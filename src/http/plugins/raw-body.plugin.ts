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
  app.decorateRequest('bodyParseError', false);
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (request, body, done) => {
    const raw = body as Buffer;
    request.rawBody = raw;
    if (raw.length === 0) return done(null, undefined);
    try {
      done(null, JSON.parse(raw.toString('utf8')));
    } catch {
      request.bodyParseError = true;
      done(null, undefined);
    }
  });
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
 * JSON, and no text holds NUL, which PostgreSQL cannot store in `text` (it would fail in the database as
 * a 500 instead of a 400 naming the field).
 */
export function assertParsableInput(request: FastifyRequest): void {
  if (request.bodyParseError) throw invalid('body: is not valid JSON');
  for (const [part, value] of [
    ['params', request.params],
    ['query', request.query],
    ['body', request.body],
  ] as const) {
    const path = nulPath(value, '');
    if (path !== null) throw invalid(`${path || part}: must not contain the NUL character (\\u0000)`);
  }
}
