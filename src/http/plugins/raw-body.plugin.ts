import type { FastifyInstance } from 'fastify';
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
