import { errorCodes, type FastifyInstance, type FastifyRequest } from 'fastify';
import { invalid } from '../domain/errors.ts';
import './request-context.ts';

/**
 * Keeps the raw body bytes for signature checks; they are read as JSON only after authentication
 * (assertParsableInput, input-checks.ts), so a malformed body is answered 400 after the 401, per the order of checks in
 * wire-contract §9, and a caller with no credentials costs no parse: decoding, the structure scan and the parse of
 * a 1 MB body took 35–135 ms of the event loop, before the 401 (review). Every content type is read as JSON, as the
 * vendor's API does.
 */
export function installRawBodyParser(app: FastifyInstance): void {
  app.decorateRequest('rawBody', undefined);
  // Every content type is read as JSON, so a Content-Type that is no media type at all ("json", "") is too:
  // Fastify would refuse it with 415 before authentication, against the order of checks. So is a QUERY's missing one,
  // which Fastify refuses with 400 (RFC 10008 §2) on any path, a caller without credentials included (probe); no
  // route takes QUERY, so after the checks before it, it is a 404.
  app.addHook('onRequest', (request, _reply, done) => {
    const type = request.headers['content-type'];
    if (type === undefined ? request.method === 'QUERY' : !MEDIA_TYPE.test(type))
      request.headers['content-type'] = 'application/json';
    done();
  });
  app.removeAllContentTypeParsers();
  app.addContentTypeParser('*', { parseAs: 'buffer' }, (request, body, done) => {
    request.rawBody = body as Buffer;
    done(null, undefined);
  });
}

/** Whether a request announces a body (read or not). */
export function announcesBody(request: FastifyRequest): boolean {
  const { headers } = request.raw;
  return headers['transfer-encoding'] !== undefined || Number(headers['content-length'] ?? 0) > 0;
}

/** The methods whose body Fastify reads for a route (its `bodywith` methods); it leaves a GET's unread. */
export const METHODS_WITH_BODY = new Set(['DELETE', 'OPTIONS', 'PATCH', 'PUT', 'POST', 'QUERY']);

/**
 * A request's body that Fastify has not read, read into `rawBody` as Fastify reads one: at most `limitBytes` (else its
 * 413), a length that disagrees with Content-Length a 400. So the signature, which covers the body as sent
 * (wire-contract §1), is checked against it:
 * - for a request refused before routing (a URL Fastify's router cannot read): left unread, a caller holding only a
 *   key's id (sent in every request) got past the 401, and from an address off the platform's allow-list learned the
 *   key's platform (probe);
 * - for a GET's (or HEAD's), which Fastify never reads: a GET signed over the body it carried was told its signature
 *   was wrong (probe). It is signed, not read: no route takes one.
 * Ours, not a library's: Fastify's reader (content-type-parser.js) runs only within a route's parsing, and this
 * mirrors it.
 */
export function readUnreadBody(request: FastifyRequest, limitBytes: number): Promise<void> {
  // A CONNECT's bytes after its head are a tunnel's, handed to the 'connect' listener, never a body (review: a
  // Content-Length was then "not met", a 400 before the 401).
  if (request.rawBody !== undefined || request.method === 'CONNECT' || !announcesBody(request))
    return Promise.resolve();
  const declared = Number(request.headers['content-length']);
  if (declared > limitBytes) return Promise.reject(new errorCodes.FST_ERR_CTP_BODY_TOO_LARGE());
  const payload = request.raw;
  // Gone while the checks before this one awaited (the firewall's reload, Redis): no event would come (review).
  if (payload.destroyed) return Promise.reject(invalid('body: not received whole'));
  return new Promise((resolve, reject) => {
    let received = 0;
    const chunks: Buffer[] = [];
    const stop = () => {
      payload.off('data', onData);
      payload.off('end', onEnd);
      payload.off('error', onEnd);
    };
    function onData(chunk: Buffer) {
      received += chunk.length;
      if (received > limitBytes) {
        stop();
        reject(new errorCodes.FST_ERR_CTP_BODY_TOO_LARGE());
        return;
      }
      chunks.push(chunk);
    }
    function onEnd(error?: Error) {
      stop();
      if (error) reject(invalid('body: not received whole'));
      else if (!Number.isNaN(declared) && received !== declared) {
        reject(new errorCodes.FST_ERR_CTP_INVALID_CONTENT_LENGTH());
      } else {
        request.rawBody = Buffer.concat(chunks, received);
        resolve();
      }
    }
    payload.on('data', onData);
    payload.on('end', onEnd);
    payload.on('error', onEnd);
    payload.resume();
  });
}

/** A type/subtype media type, as Fastify tells one (lib/content-type.js): token "/" token, then parameters. */
const MEDIA_TYPE = /^\s*[\w!#$%&'*+.^`|~-]+\/[\w!#$%&'*+.^`|~-]+\s*(;|$)/;
