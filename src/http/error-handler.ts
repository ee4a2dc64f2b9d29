import type { FastifyError, FastifyInstance, FastifyReply, FastifyRequest } from 'fastify';
import { randomUUID } from 'node:crypto';
import { STATUS_CODES } from 'node:http';
import type { Duplex } from 'node:stream';
import {
  DomainError,
  OutcomeUnknownError,
  pgErrorCode,
  PG_DEADLOCK,
  PG_LOCK_NOT_AVAILABLE,
  PG_READ_ONLY_TRANSACTION,
  PG_SERIALIZATION_FAILURE,
  refusedConnection,
} from '../domain/errors.ts';
import { runEdgeHooks, type EdgeHook } from './plugins/public-edge.ts';
import { TOO_MANY_REQUESTS_BODY } from './plugins/rate-limit.plugin.ts';
import { retryAfterSeconds, type RateLimiter } from '../domain/ratelimit/rate-limiter.ts';
import { committedAWrite, trackingWrites } from '../store/database.ts';
import { ALLOW_RETRY_HEADER, FIREWALL_REFUSAL_TEXT, REQUEST_ID_HEADER } from '../contract/wire-values.ts';
import { describeValidation, MAX_PROBLEMS_LISTED, MORE_PROBLEMS } from './validation-messages.ts';

/**
 * The one place that turns errors into wire-contract §3 bodies. A 5xx never shows internals: the detail
 * goes to the log with the request id, the caller gets the fixed body.
 */
export function sendDomainError(reply: FastifyReply, error: DomainError): FastifyReply {
  switch (error.code) {
    case 'invalid':
      return reply.code(400).send({ errors: listed(error.messages) });
    case 'unauthenticated':
      return reply.code(401).send({ error: error.messages[0] ?? 'Unauthorized' });
    case 'forbidden':
      return reply.code(403).send({ error: true, message: error.messages[0] ?? 'Forbidden' });
    case 'not_found':
      // The public API's 404 is the vendor's bare body (wire-contract §3); the operator API's says what is
      // missing (a platform, a deposit address, …), which the bare body left to guess (review).
      return reply.code(404).send({ error: 'Not Found', ...operatorDetail(reply, error, 'Not Found') });
    case 'conflict':
      return reply.code(409).send({ errors: error.messages });
    case 'unavailable':
      return sendUnavailable(reply, operatorDetail(reply, error, 'Service Unavailable'));
  }
}

/**
 * At most MAX_PROBLEMS_LISTED of a service check's problems, as a schema's (validation-messages.ts): 1,000 bad entries
 * of an allow-list were all listed, and 60,000 bad price pairs made a 6 MB answer (probe).
 */
function listed(messages: string[]): string[] {
  if (messages.length <= MAX_PROBLEMS_LISTED) return messages;
  return [...messages.slice(0, MAX_PROBLEMS_LISTED), `body: ${MORE_PROBLEMS}`];
}

/**
 * The operator API's `message` beside the public body: the domain's words, when they say more than the status.
 * Nothing on the public API, whose bodies are the vendor's (wire-contract §3).
 */
function operatorDetail(reply: FastifyReply, error: DomainError, status: string): { message?: string } {
  const message = error.messages[0];
  return isOperatorPath(reply.request.url) && message && message !== status ? { message } : {};
}

export function sendUnavailable(reply: FastifyReply, detail: { message?: string } = {}): FastifyReply {
  return reply
    .code(503)
    .header(ALLOW_RETRY_HEADER, 'true')
    .send({ error: 'Service Unavailable', ...detail });
}

/** Transient database conditions that a retry can clear: 503 with svc-allow-retry (spec 7, 503 row). */
const TRANSIENT_PG_CODES = new Set([
  PG_SERIALIZATION_FAILURE,
  PG_DEADLOCK,
  PG_LOCK_NOT_AVAILABLE,
  '57P01',
  '57P03',
  // Class 53, insufficient resources: a full disk (53100), no memory (53200), no connection slot (53300). The
  // store cannot take the write now; a retry can (review: a full disk answered 500).
  '53100',
  '53200',
  '53300',
  // A database that takes no write: a standby promoted away from, or read-only for maintenance
  // (`default_transaction_read_only`). Another instance, or this one after the failover's DNS moves, can take it
  // (probe: every write answered 500, "do not retry").
  PG_READ_ONLY_TRANSACTION,
  '08006',
  '08001',
  '08003',
]);
const TRANSIENT_NET_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE']);

function isRead(method: string): boolean {
  return method === 'GET' || method === 'HEAD';
}

function isTransient(error: unknown): boolean {
  if (error instanceof OutcomeUnknownError || refusedConnection(error)) return true;
  const code = pgErrorCode(error);
  if (code && (TRANSIENT_PG_CODES.has(code) || TRANSIENT_NET_CODES.has(code))) return true;
  const message = error instanceof Error ? error.message : '';
  // pg's words for a connection lost (mid-statement; while connecting; between the statements of a
  // transaction, e.g. one snapshot's reads, which then say it "is not queryable").
  return /Connection terminated|timeout exceeded when trying to connect|is not queryable/i.test(message);
}

/** What the client-error handler asks of the public API's firewall; absent on a listener without one. */
export interface ClientErrorFirewall {
  /** wire-contract §2.1: false → the 1020. */
  allows(ip: string): Promise<boolean>;
  /** Whether a peer is a trusted proxy (SVC_TRUST_PROXY), whose client an unparsed request does not name. */
  isProxy(ip: string): boolean;
  /**
   * Whether the firewall stands before a request for `url` on this listener (not before the operator API or the
   * probes it may also serve); `url` is undefined where the parser failed before the request line was read.
   */
  covers(url: string | undefined): boolean;
  /** The per-IP rate limit (wire-contract §2.3), when the listener has one: such a request counts as any other. */
  limiter?: Pick<RateLimiter, 'decide'>;
}

/**
 * Told of each answer to a request the parser refused, with the request id the answer carries, for its log line:
 * `blockStarted` for the refusal that started its address's rate-limit block (logged at info, as a routed one is: a
 * block started by a malformed request left no line, review), the others to be logged at debug (a flood of them;
 * log probe: an id a client quoted was in no line at any level).
 */
export type ParserRefusalLog = (
  fields: {
    reqId: string;
    remoteAddress: string | undefined;
    statusCode: number;
    code: string | undefined;
    /** false when the answer could not be written (the client gone): no one got `reqId`. */
    answered?: false;
  },
  blockStarted: boolean,
) => void;

/**
 * A request Node's HTTP parser refuses (a malformed request line or header, headers over the size limit, a
 * request that took too long to arrive) never reaches Fastify; it gets the wire-contract §3 error body and
 * an X-REQUEST-ID like every other answer, then the connection is closed. In place of Fastify's default
 * (`clientErrorHandler`), which answers another body and no request id. With a `firewall` (the public API's), a
 * peer on no allow-list gets the 1020 first, as for any other request (wire-contract §9): a malformed request
 * was the one way for such an address to learn that the service was there (probe). Not for a request the firewall
 * does not cover (the operator API or the probes on the same listener: a slow operator upload got the 1020, review),
 * nor behind a trusted proxy, whose client is not known (its X-Forwarded-For is in the headers that did not parse).
 * Then it counts against its address's rate limit, and an address blocked gets the 429 (wire-contract §2.3: "every
 * request from that IP gets 429"; probe: 2,100 malformed requests in a second went uncounted, and a blocked address
 * still had its 400s and 431s).
 */
export function clientErrorAnswerer(firewall?: ClientErrorFirewall, log?: ParserRefusalLog) {
  return function answerClientError(error: NodeJS.ErrnoException, socket: Duplex): void {
    // A reset connection has nobody to answer (https://nodejs.org/api/http.html#event-clienterror).
    if (error.code === 'ECONNRESET' || socket.destroyed) return;
    const connection = socket as Duplex & {
      remoteAddress?: string;
      parser?: { incoming?: { url?: string; complete: boolean } | null } | null;
    };
    const peer = connection.remoteAddress;
    const answer = (status: number, content: RawContent, blockStarted = false) => {
      const reqId = randomUUID();
      // A block's start is told even when its answer could not be written (the client gone meanwhile): the block
      // holds all the same, and its other refusals are not at info (review).
      const answered = answerRaw(error, socket, status, content, reqId);
      if (answered || blockStarted)
        log?.(
          {
            reqId,
            remoteAddress: peer,
            statusCode: status,
            code: error.code,
            ...(answered ? {} : { answered }),
          },
          blockStarted,
        );
    };
    const answerParserError = () => answer(...parserErrorAnswer(error));
    if (!firewall || peer === undefined || firewall.isProxy(peer)) {
      answerParserError();
      return;
    }
    // Node names a request's URL once its headers are read, and hands the request to Fastify then, whose hooks have
    // checked and counted it (one that fails in its body, or takes too long to send it): counted once. The request
    // Node names once its message is complete is the one before on the connection, not this one.
    // (`incoming` is null on a connection none has reached yet.)
    const incoming = connection.parser?.incoming;
    const url = incoming?.complete === false ? incoming.url : undefined;
    const { limiter } = firewall;
    // Until the answer is written, the connection reads nothing more (Node's parser is done with it).
    const afterFirewall = () =>
      url !== undefined || !limiter
        ? answerParserError()
        : // The parser's answer, counted against the peer's rate limit; the 429 (wire-contract §2.3) if it is blocked.
          limiter.decide(peer, (decision) =>
            decision.allowed
              ? answerParserError()
              : answer(
                  429,
                  {
                    type: 'application/json; charset=utf-8',
                    body: TOO_MANY_REQUESTS_BODY,
                    headers: `retry-after: ${retryAfterSeconds(decision.retryAfterMs)}\r\n`,
                  },
                  decision.blockStarted,
                ),
          );
    if (!firewall.covers(url)) {
      // On a listener that also serves the operator API, a request refused before its URL was read may be the
      // operator's, which the firewall does not stand before. The rate limit still counts it (a flood of them is
      // limited like any other, wire-contract §9); the operator's well-formed requests are never limited.
      afterFirewall();
      return;
    }
    firewall.allows(peer).then(
      (allowed) => (allowed ? afterFirewall() : answer(403, FIREWALL_TEXT)),
      // The allow-lists unreadable (the database gone): the parser's answer, which tells nothing of them.
      () => answerParserError(),
    );
  };
}

interface RawContent {
  type: string;
  body: string;
  headers?: string;
}

const FIREWALL_TEXT: RawContent = { type: 'text/plain; charset=utf-8', body: FIREWALL_REFUSAL_TEXT };

/** The status and body answering a request the parser refused. */
function parserErrorAnswer(error: NodeJS.ErrnoException): [number, RawContent] {
  const [status, problem] =
    error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
      ? [408, 'request: not received in time']
      : error.code === 'HPE_HEADER_OVERFLOW'
        ? [431, 'request: headers too large']
        : [400, 'request: malformed HTTP request'];
  return [status, { type: 'application/json', body: JSON.stringify({ errors: [problem] }) }];
}

/** Writes the answer, unless one has begun on the connection, and closes it; whether it was written. */
function answerRaw(
  error: NodeJS.ErrnoException,
  socket: Duplex,
  status: number,
  { type, body, headers = '' }: RawContent,
  reqId: string,
): boolean {
  // As Node's own handler: not when a response on this connection has begun (a firewall's 1020 answered
  // before the body was read, then the body turned out malformed): a second one would be read as part of it.
  const answering = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
  const writing = socket.writable && !answering?.headersSent;
  if (writing) {
    socket.write(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\ncontent-type: ${type}\r\n` +
        `content-length: ${Buffer.byteLength(body)}\r\n${REQUEST_ID_HEADER}: ${reqId}\r\n${headers}` +
        `connection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy(error);
  return writing;
}

export function sendNotFound(_request: FastifyRequest, reply: FastifyReply): FastifyReply {
  return reply.code(404).send({ error: 'Not Found' });
}

/** The operator API's prefix (DESIGN §3), on whichever listener serves it. */
export const OPERATOR_PREFIX = '/admin';

/** Whether `url` is the operator API's (its prefix, then the end, a `/` or a query). */
export function isOperatorPath(url: string): boolean {
  return (
    url === OPERATOR_PREFIX || url.startsWith(`${OPERATOR_PREFIX}/`) || url.startsWith(`${OPERATOR_PREFIX}?`)
  );
}

/** An operator path no route matches: named, so that a typo or a wrong version of the CLI shows as such. */
export function sendOperatorNotFound(request: FastifyRequest, reply: FastifyReply): FastifyReply {
  const path = request.url.split('?')[0]!;
  return reply
    .code(404)
    .send({ error: 'Not Found', message: `no operator API route ${request.method} ${path.slice(0, 200)}` });
}

/**
 * The error handler, and the handler of paths no route matches, after `notFoundHooks` (the public API's
 * firewall and rate limit: an unmatched path is refused and counted like any public request) and
 * `notFoundAuthentication`, for the paths `isPublic` says are the public API's. The hooks run on the request, before
 * the body is read (a blocked IP posting a body too large to an unknown path gets its 429, not a 413 that the limiter
 * never saw); the authentication after it is read, as a route's does.
 */
export function installErrorHandlers(
  app: FastifyInstance,
  {
    notFoundHooks = [],
    isPublic = () => true,
    notFoundAuthentication,
  }: {
    notFoundHooks?: EdgeHook[];
    isPublic?: (url: string) => boolean;
    notFoundAuthentication?: (request: FastifyRequest) => Promise<unknown>;
  } = {},
): void {
  if (notFoundHooks.length > 0) {
    app.addHook('onRequest', (request, reply, done) => {
      if (!request.is404 || !isPublic(request.url)) return done();
      // A hook that answers ends the request there (Fastify's "respond from a hook"): done is not called.
      runEdgeHooks(notFoundHooks, request, reply, () => done());
    });
  }
  // wire-contract §9: authentication (401) and the allow-list (403) come before existence (404), for a path no
  // route matches too: answered 404 to anyone, it told a caller without credentials which routes and methods
  // there are (probe). After the body is read, as for a route, so that the signature over it is checked.
  if (notFoundAuthentication) {
    app.addHook('preValidation', async (request) => {
      if (request.is404 && isPublic(request.url)) await notFoundAuthentication(request);
    });
  }
  // Each request's writes are tracked, so that a database connection lost after one of them committed is
  // answered as of unknown outcome (502), not as retryable (503): see store/database.ts. From preHandler, the
  // last hook before the handler (a body is read in callbacks that do not carry the context on); whatever
  // runs before it writes nothing.
  // Writes only: a read is resent either way, and AsyncLocalStorage turns on promise hooks (on Node 20, a cost
  // to every promise of the process) at its first use, which a process serving only GETs (an ops listener
  // beside the webhook worker) then never pays.
  app.addHook('preHandler', (request, _reply, done) =>
    isRead(request.method) ? done() : trackingWrites(done),
  );
  app.setErrorHandler(sendError);
  app.setNotFoundHandler(sendNotFound);
}

/** An error's code and message on one line (an AggregateError, such as both of localhost's addresses refused, has no message). */
function oneLineCause(error: unknown): string {
  const err = error as { message?: string; code?: string; errors?: unknown[] };
  const message =
    err.message ||
    (Array.isArray(err.errors) ? err.errors.map(oneLineCause).join('; ') : '') ||
    String(error);
  return `${err.code ? `${err.code}: ` : ''}${message}`.replace(/\s*\n\s*/g, ' ');
}

/**
 * The error handler, also called directly where Fastify would use its own: the answers to URLs its router
 * refuses are made on a context of its own, created before ours is installed, whose default handler would
 * answer a failed edge hook (a database gone while the firewall reloads) with a 500 naming the cause.
 */
export function sendError(error: FastifyError, request: FastifyRequest, reply: FastifyReply): FastifyReply {
  if (error instanceof DomainError) return sendDomainError(reply, error);
  if (error.validation) return reply.code(400).send({ errors: describeValidation(error) });
  // Fastify's own 4xx errors (FST_ERR_CTP_BODY_TOO_LARGE is the 413).
  if (error.statusCode && error.statusCode >= 400 && error.statusCode < 500) {
    if (error.statusCode === 404) return reply.code(404).send({ error: 'Not Found' });
    if (error.statusCode === 413) return reply.code(413).send({ errors: ['body too large'] });
    return reply.code(400).send({ errors: [`request: ${error.message}`] });
  }
  // PostgreSQL class 22 (data exception: out of range, not representable, bad encoding) means an input
  // that validation let through; it is the caller's, so 400, not 500. Routes should name the field in
  // their schemas; this is the safety net. The detail (which may quote the value) goes to the log only.
  if (pgErrorCode(error)?.startsWith('22')) {
    request.log.warn({ err: error }, 'input refused by the database');
    return reply.code(400).send({ errors: ['request: a value is out of range or cannot be stored'] });
  }
  // Spec 7 and 7.1.2: a write that may have been carried out is a 502, which a client answers with an
  // idempotence check before retrying; the 503 below tells it to resend as is. A read is resent either way.
  // Also any retryable failure (a connection not had, a later transaction's serialization failure) once
  // the request has committed a write: a resend would write again.
  const unknown = error instanceof OutcomeUnknownError || (committedAWrite() && isTransient(error));
  if (unknown && !isRead(request.method)) {
    request.log.warn({ err: error }, 'a write may have been carried out: outcome unknown');
    return reply.code(502).send({ error: 'Bad Gateway' });
  }
  if (isTransient(error)) {
    // The cause in one line, without its stack: during an outage every request fails alike, and a stack a
    // request flooded the log (review: about 900 lines in 5 s at 4 requests in flight). The stack is at debug.
    request.log.warn({ error: oneLineCause(error) }, 'transient failure');
    request.log.debug({ err: error }, 'transient failure');
    return sendUnavailable(reply);
  }
  request.log.error({ err: error }, 'unhandled error');
  return reply.code(500).send({ error: 'Internal Server Error' });
}
