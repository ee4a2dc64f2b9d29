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
  PG_SERIALIZATION_FAILURE,
} from '../domain/errors.ts';
import { runEdgeHooks, type EdgeHook } from './plugins/public-edge.ts';
import { committedAWrite, trackingWrites } from '../store/database.ts';
import { ALLOW_RETRY_HEADER, REQUEST_ID_HEADER } from '../contract/wire-values.ts';

/**
 * The one place that turns errors into wire-contract §3 bodies. A 5xx never shows internals: the detail
 * goes to the log with the request id, the caller gets the fixed body.
 */
export function sendDomainError(reply: FastifyReply, error: DomainError): FastifyReply {
  switch (error.code) {
    case 'invalid':
      return reply.code(400).send({ errors: error.messages });
    case 'unauthenticated':
      return reply.code(401).send({ error: error.messages[0] ?? 'Unauthorized' });
    case 'forbidden':
      return reply.code(403).send({ error: true, message: error.messages[0] ?? 'Forbidden' });
    case 'not_found':
      return reply.code(404).send({ error: 'Not Found' });
    case 'conflict':
      return reply.code(409).send({ errors: error.messages });
    case 'unavailable':
      return sendUnavailable(reply);
  }
}

export function sendUnavailable(reply: FastifyReply): FastifyReply {
  return reply.code(503).header(ALLOW_RETRY_HEADER, 'true').send({ error: 'Service Unavailable' });
}

/**
 * ajv's instancePath is a JSON pointer ("/pairs/BTC~1USD", "/cidrs/0"): shown as the caller wrote the field,
 * "pairs.BTC/USD", "cidrs[0]".
 */
function fieldName(instancePath: string): string {
  return instancePath
    .split('/')
    .slice(1)
    .map((segment) => clip(segment.replaceAll('~1', '/').replaceAll('~0', '~')))
    .reduce(
      (path, segment) =>
        /^\d+$/.test(segment) ? `${path}[${segment}]` : path ? `${path}.${segment}` : segment,
      '',
    );
}

/** A field name is the caller's text (a record key): shown in full up to 64 characters, never echoed whole. */
function clip(name: string): string {
  return name.length > 64 ? `${name.slice(0, 61)}…` : name;
}

/** The most allowed values a 400 lists. */
const MAX_VALUES_LISTED = 16;
/**
 * The most problems a 400 lists, and the most of ajv's errors read to find them. Every bad element of an array is
 * an error of its own: a body of 200,000 empty `fees` (600 KB, under the 1 MiB limit) made a 13 MB answer and held
 * the event loop for about a second (review, session 31). The first ones name the problem; a last line says more
 * were found.
 */
const MAX_PROBLEMS_LISTED = 50;
const MAX_ERRORS_READ = 1_000;

type AjvError = NonNullable<FastifyError['validation']>[number] & {
  /** With ajv's `verbose`: the keyword's value (for anyOf, its branches) and the schema holding it. */
  schema?: unknown;
  parentSchema?: { description?: unknown };
};

/** The values a branch of an anyOf allows, when it is a list of values (a literal, an enum, null); else null. */
function valuesOf(branch: unknown): unknown[] | null {
  const b = branch as { const?: unknown; enum?: unknown; type?: unknown } | null;
  if (b === null || typeof b !== 'object') return null;
  if ('const' in b) return [b.const];
  if (Array.isArray(b.enum)) return b.enum;
  if (b.type === 'null') return [null];
  return null;
}

/**
 * ajv reports a failed anyOf (a union) as an error per branch and one for the anyOf: "must be equal to constant",
 * "must match a schema in anyOf" (review: a 400 that did not say what is allowed). Said once instead: a union of
 * values (TypeBox's union of literals) as the list of them; a nullable (a schema or null) as its schema's problems
 * alone. Other unions are left as ajv says them.
 */
function foldUnions(items: AjvError[]): AjvError[] {
  const dropped = new Set<AjvError>();
  const replaced = new Map<AjvError, AjvError>();
  for (const item of items) {
    if (item.keyword !== 'anyOf' || !Array.isArray(item.schema)) continue;
    const branches = item.schema as unknown[];
    const ofBranch = (i: number | null) =>
      items.filter(
        (other) =>
          other !== item &&
          (other.instancePath === item.instancePath ||
            other.instancePath.startsWith(`${item.instancePath}/`)) &&
          other.schemaPath.startsWith(`${item.schemaPath}/${i ?? ''}`),
      );
    const values = branches.map(valuesOf);
    if (values.every((v) => v !== null)) {
      const allowed = values.flat().map((v) => (v === null ? 'null' : String(v)));
      if (allowed.length > MAX_VALUES_LISTED) continue;
      for (const other of ofBranch(null)) dropped.add(other);
      replaced.set(item, { ...item, keyword: 'enum', params: { allowedValues: allowed } });
      continue;
    }
    const nullAt = values.findIndex((v) => v?.length === 1 && v[0] === null);
    if (branches.length === 2 && nullAt >= 0) {
      for (const other of ofBranch(nullAt)) dropped.add(other);
      dropped.add(item);
      // A value of another type is said to be of neither: "must be string or null".
      for (const other of ofBranch(1 - nullAt)) {
        if (other.keyword === 'type' && other.instancePath === item.instancePath)
          replaced.set(other, { ...other, message: `${other.message ?? 'is of the wrong type'} or null` });
      }
    }
  }
  return items.filter((item) => !dropped.has(item)).map((item) => replaced.get(item) ?? item);
}

/** ajv error → "<field>: <problem>", naming the field as the caller sent it. */
function describeValidation(error: FastifyError): string[] {
  const all = (error.validation ?? []) as AjvError[];
  const messages = new Set<string>();
  for (const item of foldUnions(all.slice(0, MAX_ERRORS_READ))) {
    messages.add(describeOne(error, item));
    if (messages.size === MAX_PROBLEMS_LISTED) break;
  }
  if (messages.size === MAX_PROBLEMS_LISTED || all.length > MAX_ERRORS_READ)
    messages.add(`${contextName(error)}: more problems, not listed (the first ${messages.size} are)`);
  return [...messages];
}

/** What a problem of the request part as a whole is said of: `body`, `querystring`… */
function contextName(error: FastifyError): string {
  return error.validationContext === 'body' ? 'body' : (error.validationContext ?? 'request');
}

function describeOne(error: FastifyError, item: AjvError): string {
  const params = item.params as Record<string, unknown>;
  const base = fieldName(item.instancePath);
  if (item.keyword === 'required') {
    const field = [base, clip(String(params.missingProperty))].filter(Boolean).join('.');
    return `${field}: is required`;
  }
  if (item.keyword === 'additionalProperties') {
    const field = [base, clip(String(params.additionalProperty))].filter(Boolean).join('.');
    return `${field}: is not allowed`;
  }
  const field = base || contextName(error);
  // A pattern is said in the words of its schema's description where it has one, not as the regex.
  // (ajv's `verbose` adds parentSchema; Fastify's type of the error does not declare it.)
  const description = item.parentSchema?.description;
  if (item.keyword === 'pattern' && typeof description === 'string')
    return `${field}: is not in the expected form (${description})`;
  // A short list is said (review: "must be equal to one of the allowed values" left the caller guessing); a long
  // one (countries) is in the API docs.
  const allowed = params.allowedValues;
  if (item.keyword === 'enum' && Array.isArray(allowed) && allowed.length <= MAX_VALUES_LISTED)
    return `${field}: must be one of ${allowed.join(', ')}`;
  return `${field}: ${item.message ?? 'is invalid'}`;
}

/** Transient database conditions that a retry can clear: 503 with svc-allow-retry (spec 7, 503 row). */
const TRANSIENT_PG_CODES = new Set([
  PG_SERIALIZATION_FAILURE,
  PG_DEADLOCK,
  PG_LOCK_NOT_AVAILABLE,
  '57P01',
  '57P03',
  '53300',
  '08006',
  '08001',
  '08003',
]);
const TRANSIENT_NET_CODES = new Set(['ECONNREFUSED', 'ECONNRESET', 'ETIMEDOUT', 'EPIPE']);

function isRead(method: string): boolean {
  return method === 'GET' || method === 'HEAD';
}

function isTransient(error: unknown): boolean {
  if (error instanceof OutcomeUnknownError) return true;
  const code = pgErrorCode(error);
  if (code && (TRANSIENT_PG_CODES.has(code) || TRANSIENT_NET_CODES.has(code))) return true;
  const message = error instanceof Error ? error.message : '';
  // pg's words for a connection lost (mid-statement; while connecting; between the statements of a
  // transaction, e.g. one snapshot's reads, which then say it "is not queryable").
  return /Connection terminated|timeout exceeded when trying to connect|is not queryable/i.test(message);
}

/**
 * A request Node's HTTP parser refuses (a malformed request line or header, headers over the size limit, a
 * request that took too long to arrive) never reaches Fastify; it gets the wire-contract §3 error body and
 * an X-REQUEST-ID like every other answer, then the connection is closed. In place of Fastify's default
 * (`clientErrorHandler`), which answers another body and no request id.
 */
export function answerClientError(error: NodeJS.ErrnoException, socket: Duplex): void {
  // A reset connection has nobody to answer (https://nodejs.org/api/http.html#event-clienterror).
  if (error.code === 'ECONNRESET' || socket.destroyed) return;
  const [status, problem] =
    error.code === 'ERR_HTTP_REQUEST_TIMEOUT'
      ? [408, 'request: not received in time']
      : error.code === 'HPE_HEADER_OVERFLOW'
        ? [431, 'request: headers too large']
        : [400, 'request: malformed HTTP request'];
  const body = JSON.stringify({ errors: [problem] });
  // As Node's own handler: not when a response on this connection has begun (a firewall's 1020 answered
  // before the body was read, then the body turned out malformed): a second one would be read as part of it.
  const answering = (socket as Duplex & { _httpMessage?: { headersSent?: boolean } })._httpMessage;
  if (socket.writable && !answering?.headersSent) {
    socket.write(
      `HTTP/1.1 ${status} ${STATUS_CODES[status]}\r\ncontent-type: application/json\r\n` +
        `content-length: ${Buffer.byteLength(body)}\r\n${REQUEST_ID_HEADER}: ${randomUUID()}\r\n` +
        `connection: close\r\n\r\n${body}`,
    );
  }
  socket.destroy(error);
}

export function sendNotFound(_request: FastifyRequest, reply: FastifyReply): FastifyReply {
  return reply.code(404).send({ error: 'Not Found' });
}

/**
 * The error handler, and the handler of paths no route matches, after `notFoundHooks` (the public API's
 * firewall and rate limit: an unmatched path is refused and counted like any public request) for the paths
 * `isPublic` says are the public API's. Those run as onRequest hooks, before the body is read: a blocked IP
 * posting a body too large to an unknown path gets its 429, not a 413 that the limiter never saw.
 */
export function installErrorHandlers(
  app: FastifyInstance,
  {
    notFoundHooks = [],
    isPublic = () => true,
  }: { notFoundHooks?: EdgeHook[]; isPublic?: (url: string) => boolean } = {},
): void {
  if (notFoundHooks.length > 0) {
    app.addHook('onRequest', (request, reply, done) => {
      if (!request.is404 || !isPublic(request.url)) return done();
      // A hook that answers ends the request there (Fastify's "respond from a hook"): done is not called.
      runEdgeHooks(notFoundHooks, request, reply, () => done());
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
