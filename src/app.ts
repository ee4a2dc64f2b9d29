import { randomUUID } from 'node:crypto';
import { ServerResponse, type IncomingMessage } from 'node:http';
import type { Duplex } from 'node:stream';
import Fastify, {
  LogController,
  type FastifyBaseLogger,
  type FastifyError,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
} from 'fastify';
import proxyAddr from '@fastify/proxy-addr';
import swagger from '@fastify/swagger';
import swaggerUi from '@fastify/swagger-ui';
import { Ajv } from 'ajv';
import type { Registry } from 'prom-client';
import type { Config } from './config.ts';
import type { RateLimiter } from './domain/ratelimit/rate-limiter.ts';
import type { Services } from './domain/services.ts';
import type { Clock } from './lib/clock.ts';
import type { Store } from './store/database.ts';
import {
  clientErrorAnswerer,
  installErrorHandlers,
  sendError,
  isOperatorPath,
  OPERATOR_PREFIX,
  sendOperatorNotFound,
  sendUnavailable,
} from './http/error-handler.ts';
import { withFormats } from './contract/schema-formats.ts';
import { validationErrorSummary } from './http/validation-messages.ts';
import { compileBodyValidator, newBodyAjv } from './http/body-validator.ts';
import { setClientAddress } from './http/client-address.ts';
import { repeatedHeader } from './http/repeated-header.ts';
import { closingConnections } from './http/closing-connections.ts';
import { adminAuthPlugin } from './http/plugins/admin-auth.plugin.ts';
import { authenticatedCaller, authenticationPlugin } from './http/plugins/authentication.plugin.ts';
import { metricsPlugin, requestMetrics } from './http/plugins/metrics.plugin.ts';
import { publicEdgeHooks, runEdgeHooks, type EdgeHook } from './http/plugins/public-edge.ts';
import { RefusalLog } from './http/refusal-log.ts';
import { loggedUrl } from './http/logged-url.ts';
import { assertParsableInput } from './http/input-checks.ts';
import { announcesBody, installRawBodyParser } from './http/raw-body.ts';
import {
  acceptingBooleansInAnyCase,
  refusingNumbersNotInDigits,
  refusingRepeatedParameters,
} from './http/query-coercion.ts';
import { simulatorPlugin } from './http/plugins/simulator.plugin.ts';
import { adminRoutes } from './http/routes/admin-routes.ts';
import { optionalBodiesDocumented } from './http/routes/optional-body.ts';
import { withPortablePatterns } from './http/portable-patterns.ts';
import { opsRoutes, type ReadinessCheck } from './http/routes/ops.routes.ts';
import { publicRoutes } from './http/routes/public-routes.ts';
import { jwksRoutes } from './http/routes/jwks.routes.ts';
import { timeRoutes } from './http/routes/time.routes.ts';
import { REQUEST_ID_HEADER } from './contract/wire-values.ts';

export interface AppDeps {
  config: Readonly<Config>;
  store: Store;
  services: Services;
  clock: Clock;
  logger: FastifyBaseLogger;
  metrics: Registry;
  adminToken: string;
  /**
   * The per-IP rate limit (wire-contract §2.3): hooked on the public routes after the firewall and before
   * authentication, and inspected through /admin/rate_limits. Absent → public routes are not limited.
   */
  rateLimiter?: RateLimiter;
  readiness?: ReadinessCheck[];
  /**
   * Whether the process is draining before it stops (SIGTERM with SVC_SHUTDOWN_DRAIN_MS): requests are still
   * served, /readyz answers 503 and every answer closes its connection, so that a load balancer stops
   * sending requests here and keep-alive clients move elsewhere before the listeners close.
   */
  draining?: () => boolean;
  /**
   * Extra routes inside the authenticated public scope (after firewall, rate limit, authentication and
   * allow-list). Tests and benchmarks use it to drive the whole stack with a route of their own.
   */
  extraPublicRoutes?: (app: FastifyInstance) => Promise<void>;
}

export interface AppParts {
  /** The spec's API for platforms. */
  public: boolean;
  /** The operator API under /admin. */
  admin: boolean;
  /** /healthz, /readyz and /metrics (default: served). */
  ops?: boolean;
}

/**
 * wire-contract §3: the caller's X-REQUEST-ID is echoed as sent (onboarding takes any up to 255 characters as
 * its idempotency key, 255 bytes as sent); a longer one is not sent back, the answer gets a new id. Node has already refused
 * control characters other than a tab in header values, and reads the rest a byte a character (latin1): bytes
 * beyond ASCII (an id in UTF-8) go back as they came, the answer's body then written apart from its header block
 * (`writingHeadApart`).
 */
const MAX_REQUEST_ID_LENGTH = 255;
/** The ops routes (routes/ops.routes.ts), logged at debug. */
const OPS_PATHS = new Set(['/healthz', '/readyz', '/metrics']);
const ECHOABLE_REQUEST_ID = /^[\t\x20-\x7e\x80-\xff]+$/;
const BEYOND_ASCII = /[\x80-\xff]/;
const UTF8 = new TextDecoder('utf-8', { fatal: true });

/**
 * A request id as its caller wrote it, for the logs: Node read its bytes one a character (latin1), so an id in UTF-8
 * was logged encoded twice (`é` as `Ã©`) and could not be found by the id the caller holds (probe). Bytes that are
 * no UTF-8 stay as read. The id itself keeps its bytes: it is echoed and keyed on as it came.
 */
function requestIdAsWritten(id: string): string {
  if (!BEYOND_ASCII.test(id)) return id;
  try {
    return UTF8.decode(Buffer.from(id, 'latin1'));
  } catch {
    return id;
  }
}

/**
 * A CONNECT request is served as any other (the firewall's 1020, the rate limit, then 404: no route takes it) and its
 * connection closed after the answer. With no 'connect' listener Node destroys the socket unanswered: no status, no
 * request id (probe). Node hands the socket over without a response object for CONNECT: one is made for it.
 */
function answeringConnect(server: { emit(event: 'request', ...args: unknown[]): boolean }) {
  return (req: IncomingMessage, socket: Duplex): void => {
    // Node took its own 'error' listener off the socket it handed over: a reset before the answer was an unhandled
    // 'error' event, which ended the process (review). The peer is gone; so is the connection.
    socket.on('error', () => socket.destroy());
    const res = new ServerResponse(req);
    res.shouldKeepAlive = false;
    res.assignSocket(socket as Parameters<ServerResponse['assignSocket']>[0]);
    res.on('finish', () => {
      res.detachSocket(socket as Parameters<ServerResponse['detachSocket']>[0]);
      socket.end();
    });
    server.emit('request', req, res);
  };
}

/**
 * For a request whose id has bytes beyond ASCII, its answer's string body is written as a Buffer: node writes the
 * header block and a first string body chunk as one string in the chunk's encoding, UTF-8, so those bytes went back
 * encoded twice (review: `é` came back as `Ã©`, and such ids were then not echoed at all). With a Buffer, the header
 * block is written as it was read. At the server, before Fastify, so that every answer is covered, the router's own
 * refusals (`frameworkErrors`) too.
 */
function writingHeadApart(req: IncomingMessage, res: ServerResponse): void {
  const id = req.headers[REQUEST_ID_HEADER];
  if (typeof id !== 'string' || !BEYOND_ASCII.test(id)) return;
  // end(chunk, encoding?, callback?) and write(chunk, encoding?, callback?): a string chunk in its encoding.
  const asBuffer = <F extends (...args: never[]) => unknown>(write: F): F =>
    function (this: ServerResponse, chunk?: unknown, ...rest: unknown[]) {
      const encoding = typeof rest[0] === 'string' ? (rest[0] as BufferEncoding) : 'utf8';
      const body = typeof chunk === 'string' ? Buffer.from(chunk, encoding) : chunk;
      return (write as unknown as (...args: unknown[]) => unknown).call(this, body, ...rest);
    } as unknown as F;
  res.end = asBuffer(res.end);
  res.write = asBuffer(res.write);
}

/** How much of an API key a request's log line tells. */
const API_KEY_PREFIX_LENGTH = 8;

/**
 * The one log line of a request, on completion. Flat fields: a nested req/res object costs the redaction
 * (src/main/logger.ts) about half as much again.
 */
function logCompleted(
  request: FastifyRequest,
  level: 'info' | 'debug',
  statusCode: number,
  responseTime: number,
  extra: object = {},
): void {
  // Not made at all when the level is off: a flood's lines are at debug, and its URLs need their redaction.
  if ((request.log as { isLevelEnabled?(level: string): boolean }).isLevelEnabled?.(level) === false) return;
  request.log[level](
    {
      method: request.method,
      url: loggedUrl(request),
      statusCode,
      remoteAddress: request.ip,
      responseTime,
      // Whose request it was, once authenticated (review: nothing told what a leaked key had done). The key's first
      // characters only, enough to tell a platform's keys apart in `svc keys list`: the header stays out of the logs.
      ...(request.caller
        ? {
            platform: request.caller.platformCode,
            apiKeyPrefix: request.caller.apiKey.slice(0, API_KEY_PREFIX_LENGTH),
          }
        : {}),
      ...extra,
    },
    'request completed',
  );
}

/**
 * The input checks no schema expresses (a '#', malformed percent-encoding), which the signed and operator routes run
 * after authentication, for the routes that have none to run them after: /time, the JWKS, the docs and the probes
 * (probe and review: `/time#x`, `/docs/json?x=%FF` and `/healthz#x` were 200s).
 */
async function inputChecked(request: FastifyRequest): Promise<void> {
  assertParsableInput(request);
}

/** Builds the HTTP application; never listens (entry points do). */
export async function buildApp(
  deps: AppDeps,
  parts: AppParts = { public: true, admin: true },
): Promise<FastifyInstance> {
  const { config, services } = deps;
  const refusals = new RefusalLog(deps.clock);
  // wire-contract §2 and §9: firewall, then rate limit, before anything else a public request meets.
  const edge: EdgeHook[] = parts.public
    ? publicEdgeHooks({ networkRules: services.networkRules, rateLimiter: deps.rateLimiter, refusals })
    : [];
  // A public URL the router refuses is refused (400) after the same checks as any other public request, in
  // wire-contract §9's order: the edge, then authentication and the allow-list, with its body read as a route's
  // would be (the signature covers it). Unsigned, it was a 400 before any 401 (review).
  const unroutedPublic: EdgeHook[] = parts.public
    ? [
        ...edge,
        async (request) => {
          await authenticatedCaller(services, request, config.bodyLimitBytes);
        },
      ]
    : [];
  const isOperatorUrl = (url: string) => parts.admin && isOperatorPath(url);
  // What the public firewall stands before on this listener: not the operator API nor the probes it may also serve
  // (nor the docs in cert, which stand outside it there). Where a request's URL was never read, only a listener serving
  // nothing else can say.
  const servesOps = parts.ops !== false;
  const onlyPublic = !parts.admin && !servesOps;
  const isFirewalledUrl = (url: string) => {
    const path = url.split('?', 1)[0]!;
    const docs = path === '/docs' || path.startsWith('/docs/');
    return !isOperatorUrl(url) && !(servesOps && OPS_PATHS.has(path)) && !(docs && config.env !== 'prod');
  };
  // wire-contract §2.4: X-Forwarded-For is believed only from configured proxies. Compiled once, with the
  // library Fastify itself uses, for Fastify and for the requests it refuses before routing, which it builds
  // without trustProxy (their `ip` would be the proxy's, below).
  const trusted = config.trustProxy.length > 0 ? proxyAddr.compile(config.trustProxy) : null;
  // The request counter and latency histogram, shared with the metrics plugin (which counts routed requests).
  const httpMetrics = requestMetrics(deps.metrics);
  const app = Fastify({
    loggerInstance: deps.logger,
    bodyLimit: config.bodyLimitBytes,
    // A request must arrive whole within this (Node answers 408 and closes): Fastify's default, 0, turns Node's
    // own bound off, and a client sending its body a byte at a time held a connection for good, unauthenticated
    // (authentication needs the whole body; review: 1,500 such connections from one IP). Node tracks it only
    // when the server is created with it (so in `http` too), and looks for overdue requests every
    // connectionsCheckingInterval: a second at most, so that the 408 comes when it is due (probe: at half the
    // timeout, a 30 s bound was kept 30 to 45 s). A look at each connection's start time, cheap however many.
    requestTimeout: config.requestTimeoutMs,
    http: {
      requestTimeout: config.requestTimeoutMs,
      connectionsCheckingInterval: Math.max(100, Math.min(1_000, Math.floor(config.requestTimeoutMs / 2))),
      // Node's own 400 for an HTTP/1.1 request without Host had no body and no X-REQUEST-ID (wire-contract §3:
      // every answer carries one, review): refused below, in our form, instead.
      requireHostHeader: false,
    },
    trustProxy: trusted ?? false,
    requestIdHeader: false,
    // The 400's lines are made from the errors themselves (describeValidation), not from this message.
    schemaErrorFormatter: validationErrorSummary,
    clientErrorHandler: clientErrorAnswerer(
      parts.public
        ? {
            allows: (ip) => services.networkRules.firewallAllows(ip),
            isProxy: (ip) => trusted?.(ip, 0) ?? false,
            covers: (url) => (url === undefined ? onlyPublic : isFirewalledUrl(url)),
            limiter: deps.rateLimiter,
          }
        : undefined,
      // On every listener: the id its answer carries is in a line, at debug but for the one starting a block; and
      // an answer given is counted, as the router's refusals are below (probe: a flood of malformed requests, which
      // can start blocks, was in no dashboard). Its method may be unread, and it reached no route.
      (fields, blockStarted) => {
        if (fields.answered !== false)
          httpMetrics.requests.inc({ method: 'unparsed', route: 'unmatched', status: fields.statusCode });
        deps.logger[blockStarted ? 'info' : 'debug'](fields, 'request refused before parsing');
      },
    ),
    genReqId: (req) => {
      const given = req.headers[REQUEST_ID_HEADER];
      return typeof given === 'string' &&
        given.length > 0 &&
        given.length <= MAX_REQUEST_ID_LENGTH &&
        ECHOABLE_REQUEST_ID.test(given)
        ? given
        : randomUUID();
    },
    childLoggerFactory: (logger, bindings, options) => {
      const id = bindings.reqId;
      const written = typeof id === 'string' ? requestIdAsWritten(id) : id;
      return logger.child(written === id ? bindings : { ...bindings, reqId: written }, options);
    },
    // Requests that arrive while closing get the wire-contract §3 503 from our hook below; Fastify's own
    // has another body and no svc-allow-retry or X-REQUEST-ID.
    return503OnClosing: false,
    // One log line per request, written on completion (below), instead of Fastify's two ("incoming request"
    // and "request completed"): logging was the largest cost the stack adds to a request (bench/foundation).
    logController: new LogController({ disableRequestLogging: true }),
    // Path parameters longer than this never reach schema validation; ours are at most ~80 characters.
    routerOptions: { maxParamLength: 500 },
    // URLs the router refuses before any route runs (bad percent-encoding, an over-long parameter) get the
    // wire-contract §3 400 body and a request id like every other answer, not Fastify's own body.
    frameworkErrors: (error: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
      const problem =
        error.code === 'FST_ERR_MAX_PARAM_LENGTH'
          ? 'path: a parameter is longer than 500 characters'
          : 'path: is not a valid URL';
      // Refused before routing, so no hook runs, ours included (the request id is set here): a public
      // request still meets the firewall and is counted; it is logged and measured like any other (review:
      // it was in neither the request counter nor a "request completed" line).
      const started = performance.now();
      reply.raw.once('finish', () => {
        const seconds = (performance.now() - started) / 1000;
        const status = reply.raw.statusCode;
        const { requests, latency } = httpMetrics;
        requests.inc({ method: request.method, route: 'unmatched', status });
        latency.observe({ method: request.method, route: 'unmatched' }, seconds);
        // At debug within a rate-limit block, as a routed request's (review: a malformed URL made a line at info).
        logCompleted(request, request.quietLog ? 'debug' : 'info', status, seconds * 1000, {
          code: error.code,
        });
      });
      reply.header(REQUEST_ID_HEADER, request.id);
      // Answered where the onSend hook below does not run: a body announced is not read off after the answer (the
      // firewall's, the rate limit's or a 413 come before its end), however long it says it is; the connection
      // closes instead (review: 697 MB in 3 s). The few such requests that are read whole lose their keep-alive.
      if (announcesBody(request)) reply.header('connection', 'close');
      if (trusted) setClientAddress(request, trusted);
      const operator = isOperatorUrl(request.url);
      // Answered before the token is checked, so anyone's: quieted as a stranger's refusals are (review: a flood of
      // them made a line at info each). A public one meets the firewall's quieting and the rate limit.
      if (operator && !refusals.atInfo('operator url', request.ip)) request.quietLog = true;
      runEdgeHooks(
        operator ? [] : unroutedPublic,
        request,
        reply,
        () => void reply.code(400).send({ errors: [problem] }),
        (err) => void sendError(err as FastifyError, request, reply),
      );
    },
  });
  // RFC 9110 §10.1.1: a server MAY answer 417 to an expectation other than 100-continue. Node does so itself when
  // nothing listens for it, before any hook: an address on no allow-list, or one blocked, got that bare 417 rather
  // than its 1020 or 429, uncounted and with no request id (probe). Such a request is served as any other instead,
  // the expectation ignored.
  app.server.on('checkExpectation', (req, res) => app.server.emit('request', req, res));
  // Node hands on a request's first 1,000 header lines and drops the rest unsaid (its maxHeadersCount): behind a
  // trusted proxy that writes its X-Forwarded-For last, a client that sent 1,000 lines of its own was served as the
  // address it wrote (probe: the rate limit counted the client's X-Forwarded-For, and the proxy's was gone), and a
  // signed request lost its credentials. Every line is kept: Node's bound on the header's size (16 KB) bounds them.
  app.server.maxHeadersCount = 0;
  app.server.on('connect', answeringConnect(app.server));
  app.server.prependListener('request', writingHeadApart);

  // Bodies are validated strictly (body-validator.ts); query strings and paths are text and are coerced to the
  // declared types. Every error is collected so a 400 lists every bad field. `verbose` gives each error its schema,
  // whose description says in words what a pattern wants (describeValidation).
  const bodyAjv = newBodyAjv();
  const textAjv = withFormats(
    new Ajv({ allErrors: true, coerceTypes: 'array', useDefaults: true, strict: false, verbose: true }),
  );
  app.setValidatorCompiler(({ schema, httpPart }) => {
    if (httpPart === 'body') return compileBodyValidator(bodyAjv, schema);
    const validate = textAjv.compile(schema);
    return httpPart === 'querystring'
      ? refusingRepeatedParameters(
          schema,
          refusingNumbersNotInDigits(schema, acceptingBooleansInAnyCase(schema, validate)),
        )
      : validate;
  });

  installRawBodyParser(app);
  // DESIGN §6 (SIGTERM): server.close() drops only the keep-alive connections idle when it starts; a
  // connection whose request was in flight would stay open for keepAliveTimeout and hold the process past
  // its shutdown deadline. Answers given while closing therefore close their connection.
  let closing = false;
  const connections = closingConnections(app.server);
  app.addHook('preClose', async () => {
    closing = true;
    connections.startClosing();
  });
  // Behind trusted proxies, the client's address, found once before any hook reads it (client-address.ts).
  if (trusted) {
    app.addHook('onRequest', (request, _reply, done) => {
      setClientAddress(request, trusted);
      done();
    });
  }
  // RFC 9112 §3.2: an HTTP/1.1 request without Host is refused (Node's check, turned off above for this one), as
  // the last check before the handler, so that a public one meets the firewall, the rate limit (counted) and
  // authentication first, as any 400 does (wire-contract §9). Refused in an onRequest hook, it went past them all
  // (review: a blocked address got this 400 rather than its 429, an address on no allow-list learned that the
  // service was there, and none of it was counted).
  // So is one with more than one Host line (the same section; Node keeps the first and goes on: probe).
  app.addHook('preHandler', (request, reply, done) => {
    if (repeatedHeader(request.raw.rawHeaders, ['host']))
      return void reply.code(400).send({ errors: ['host: is given more than once (send it once)'] });
    if (request.raw.httpVersion !== '1.1' || request.headers.host !== undefined) return done();
    reply.code(400).send({ errors: ['host: an HTTP/1.1 request must carry a Host header'] });
  });
  // A request still arriving when the shutdown started: retryable, elsewhere (its connection closes).
  app.addHook('onRequest', (_request, reply, done) => {
    if (!closing) return done();
    sendUnavailable(reply);
  });
  // A path no route matches is a public request too (the operator API answers its own, below); its
  // firewall and rate limit run after the hook above, so a request arriving while closing gets the 503.
  installErrorHandlers(app, {
    notFoundHooks: edge,
    isPublic: (url) => !isOperatorUrl(url),
    notFoundAuthentication: parts.public
      ? (request) => authenticatedCaller(services, request, config.bodyLimitBytes)
      : undefined,
  });
  app.addHook('onSend', async (request, reply) => {
    reply.header(REQUEST_ID_HEADER, request.id);
    if (closing || deps.draining?.()) reply.header('connection', 'close');
    // A body announced and not read (one the firewall or the rate limit refused before it came in, or that was
    // refused before authentication read it): node would read it off to the end to reach the next request on the
    // connection, however long it says it is, until the request timeout (review: 2 GB in 2 s, 1.4 cores, with no
    // credentials). The connection is closed after the answer instead.
    else if (!request.raw.complete) reply.header('connection', 'close');
  });
  // Probes and scrapes at debug: a load balancer's and Prometheus' calls, every few seconds from each, drowned
  // the requests in the info log (review).
  app.decorateRequest('quietLog', false);
  app.decorateRequest('simulated', null);
  app.addHook('onResponse', async (request, reply) => {
    const level = request.quietLog || OPS_PATHS.has(request.routeOptions.url ?? '') ? 'debug' : 'info';
    const extra = request.simulated === null ? undefined : { simulated: request.simulated };
    logCompleted(request, level, reply.statusCode, reply.elapsedTime, extra);
  });
  await app.register(metricsPlugin, { registry: deps.metrics });

  await app.register(swagger, {
    openapi: {
      openapi: '3.1.0',
      info: {
        title: 'svc-platform API',
        version: '0.1.0',
        description: 'Platform API: see README and shared/spec.',
      },
      components: {
        securitySchemes: {
          apiKey: { type: 'apiKey', in: 'header', name: 'X-SCX-API-KEY' },
          apiPassphrase: { type: 'apiKey', in: 'header', name: 'X-SCX-PASSPHRASE' },
          apiSigned: { type: 'apiKey', in: 'header', name: 'X-SCX-SIGNED' },
          apiTimestamp: { type: 'apiKey', in: 'header', name: 'X-SCX-TIMESTAMP' },
          adminToken: { type: 'http', scheme: 'bearer' },
        },
      },
      security: [{ apiKey: [], apiPassphrase: [], apiSigned: [], apiTimestamp: [] }],
    },
    transform: optionalBodiesDocumented.transform,
    transformObject: (document) => withPortablePatterns(optionalBodiesDocumented.transformObject(document)),
  });
  // Where an API is served: an ops listener (SVC_OPS_LISTEN) serves the probes and the metrics only (review: it
  // served /docs too, a document of no path).
  if (parts.public || parts.admin)
    await app.register(async (docs) => {
      // In prod the public listener's documents are behind the firewall and the rate limit, as every public
      // path: they list every route, the operator's too when it shares the listener (review: an IP the firewall
      // refuses read them). In cert they stay open, so that a fresh `npm start` shows them before any platform
      // exists; an operator listener (SVC_ADMIN_LISTEN) serves them without either.
      if (config.env === 'prod') for (const hook of edge) docs.addHook('onRequest', hook);
      docs.addHook('preValidation', inputChecked);
      await docs.register(swaggerUi, { routePrefix: '/docs' });
    });
  if (parts.ops !== false) {
    await app.register(async (ops) => {
      ops.addHook('preValidation', inputChecked);
      await ops.register(opsRoutes, {
        store: deps.store,
        registry: deps.metrics,
        readiness: deps.readiness ?? [],
        draining: deps.draining,
      });
    });
  }

  if (parts.public) {
    await app.register(async (pub) => {
      for (const hook of edge) pub.addHook('onRequest', hook);
      await pub.register(async (open) => {
        open.addHook('preValidation', inputChecked);
        await open.register(timeRoutes, { clock: deps.clock });
        await open.register(jwksRoutes, { funding: services.funding });
      });
      await pub.register(async (authed) => {
        await authed.register(authenticationPlugin, {
          authenticator: services.authenticator,
          networkRules: services.networkRules,
        });
        if (config.env === 'cert') await authed.register(simulatorPlugin);
        await publicRoutes(authed, deps);
        if (deps.extraPublicRoutes) await deps.extraPublicRoutes(authed);
      });
    });
  }

  if (parts.admin) {
    await app.register(
      async (admin) => {
        // The OpenAPI document's global security is the public API's signed headers; operator routes take
        // the bearer token instead, so that /docs "Try it out" and generated clients send what they need.
        admin.addHook('onRoute', (route) => {
          route.schema = { ...route.schema, security: [{ adminToken: [] }] };
        });
        await admin.register(adminAuthPlugin, { adminToken: deps.adminToken, refusals });
        await adminRoutes(admin, deps);
        // Its own, so that an unknown operator path is not taken for a public request (behind the token).
        admin.setNotFoundHandler(sendOperatorNotFound);
      },
      { prefix: OPERATOR_PREFIX },
    );
  }

  return app;
}
