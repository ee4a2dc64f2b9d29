import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect, createServer } from 'node:net';
import { after, before, test } from 'node:test';
import type { FastifyBaseLogger } from 'fastify';
import { Registry } from 'prom-client';
import { buildApp, type AppDeps } from '../../src/app.ts';
import { listenOn } from '../../src/http/listening.ts';
import { capturedLogger } from '../helpers/captured-log.ts';
import { rawRequest, signedHeaders } from '../helpers/probe-app.ts';
import { startTestService, type PlatformFixture, type TestService } from '../helpers/test-service.ts';

/**
 * SVC_HOST=localhost: every address the name stands for is served by the app's one server. Here "localhost" is made
 * to stand for two loopback addresses (this machine's resolves to 127.0.0.1 alone; many resolve it to ::1 as well).
 */
const SECOND = '127.0.0.2';
const twoAddresses = async () => ['127.0.0.1', SECOND];

let svc: TestService;
let platform: PlatformFixture;
before(async () => {
  svc = await startTestService();
  platform = await svc.newPlatform(); // loopback on an allow-list: the firewall lets the tests in
});
after(() => svc?.close());

/** The public app, with `routes` behind its authentication, logging to `logger`. */
function publicApp(options: { routes?: AppDeps['extraPublicRoutes']; logger?: FastifyBaseLogger } = {}) {
  const deps = svc.runtime.appDeps!;
  return buildApp(
    {
      ...deps,
      metrics: new Registry(),
      extraPublicRoutes: options.routes,
      logger: options.logger ?? deps.logger,
    },
    { public: true, admin: false },
  );
}

/** What the server at `host`:`port` writes back to `request` sent as is, until it closes the connection. */
async function exchange(host: string, port: number, request: string): Promise<string> {
  const socket = connect({ host, port });
  const chunks: Buffer[] = [];
  socket.on('data', (chunk: Buffer) => chunks.push(chunk));
  await once(socket, 'connect');
  socket.write(request);
  await once(socket, 'close');
  return Buffer.concat(chunks).toString('utf8');
}

/** Whether a connection to `host`:`port` is accepted (else refused). */
function accepts(host: string, port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host, port });
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

test("each address of localhost gets the app's own answers, not a server of Node's defaults, and is logged", async () => {
  const { logger, lines } = capturedLogger('info');
  const app = await publicApp({ logger });
  try {
    const url = await listenOn(app, { host: 'localhost', port: 0 }, twoAddresses);
    const { port } = new URL(url);
    assert.ok(lines.some((line) => line.includes(`Server listening at http://${SECOND}:${port}`)));
    // A malformed request: our wire-contract §3 body and a request id (Node's default: a bare 400, no body).
    const malformed = await exchange(SECOND, Number(port), 'GET / HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n');
    assert.match(malformed, /^HTTP\/1\.1 400 Bad Request\r\n/);
    assert.match(malformed, /\r\nx-request-id: [0-9a-f-]{36}\r\n/i);
    assert.match(malformed, /\{"errors":\["request: malformed HTTP request"\]\}$/);
    // An expectation other than 100-continue is served like any request (Node's default: a bare 417).
    const time = await rawRequest(`http://${SECOND}:${port}`, 'GET', '/time', {
      headers: { expect: 'something-else' },
    });
    assert.equal(time.status, 200);
    assert.ok(time.headers['x-request-id']);
  } finally {
    await app.close();
  }
});

test('closing the app stops every address, ending a keep-alive connection open on the second', async () => {
  const app = await publicApp();
  const url = await listenOn(app, { host: 'localhost', port: 0 }, twoAddresses);
  const port = Number(new URL(url).port);
  const idle = connect({ host: SECOND, port });
  await once(idle, 'connect');
  idle.write('GET /time HTTP/1.1\r\nHost: x\r\n\r\n');
  await once(idle, 'data'); // answered, and kept alive
  const ended = once(idle, 'close');
  await app.close();
  await ended; // the shutdown ended it (app.ts's closing connections), rather than waiting on the client
  assert.equal(await accepts(SECOND, port), false);
  assert.equal(await accepts('127.0.0.1', port), false);
});

test("the app's close waits for a request in flight on the second address, as for one on its own", async () => {
  let entered!: () => void;
  const inHandler = new Promise<void>((resolve) => (entered = resolve));
  let letGo!: () => void;
  const release = new Promise<void>((resolve) => (letGo = resolve));
  let answered = false;
  const app = await publicApp({
    routes: async (scope) => {
      scope.get('/probe/slow', async (_request, reply) => {
        reply.raw.once('finish', () => (answered = true));
        entered();
        await release;
        return { message: {} };
      });
    },
  });
  const url = await listenOn(app, { host: 'localhost', port: 0 }, twoAddresses);
  const port = Number(new URL(url).port);
  const headers = signedHeaders(platform.key, 'GET', '/probe/slow');
  const response = rawRequest(`http://${SECOND}:${port}`, 'GET', '/probe/slow', { headers });
  await inHandler;
  const closing = app.close();
  // The request is let go once the close is done, or once the app's own listener has closed and a turn of the
  // event loop has passed (so that a close that does not wait for it is done by then, and one that does never is).
  void Promise.race([closing, once(app.server, 'close').then(() => new Promise(setImmediate))]).then(letGo);
  await closing;
  assert.equal(answered, true, 'the close was done before the answer');
  assert.equal((await response).status, 200);
});

test('an address this machine does not have is skipped with a warning; one taken by another process fails the listen', async () => {
  const absent = '192.0.2.1'; // TEST-NET-1: on no interface here
  const { logger, lines } = capturedLogger('info');
  const app = await publicApp({ logger });
  try {
    const url = await listenOn(app, { host: 'localhost', port: 0 }, async () => ['127.0.0.1', absent]);
    const warning = lines.map((line) => JSON.parse(line)).find((entry) => entry.address === absent);
    assert.equal(warning?.msg, `not listening on ${absent}, an address of localhost`);
    assert.equal(warning?.err?.code, 'EADDRNOTAVAIL');
    assert.equal((await rawRequest(url, 'GET', '/time')).status, 200);
  } finally {
    await app.close();
  }

  const holder = createServer();
  await new Promise<void>((resolve) => holder.listen(0, SECOND, resolve));
  const { port } = holder.address() as { port: number };
  const second = await publicApp();
  try {
    await assert.rejects(
      listenOn(second, { host: 'localhost', port }, twoAddresses),
      (err: NodeJS.ErrnoException) => err.code === 'EADDRINUSE' && err.syscall === 'listen',
    );
  } finally {
    await second.close();
    holder.close();
  }
});
