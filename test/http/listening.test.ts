import assert from 'node:assert/strict';
import { once } from 'node:events';
import { connect, createServer } from 'node:net';
import { after, before, test } from 'node:test';
import { Registry } from 'prom-client';
import { buildApp } from '../../src/app.ts';
import { listenOn } from '../../src/http/listening.ts';
import { rawRequest } from '../helpers/probe-app.ts';
import { startTestService, type TestService } from '../helpers/test-service.ts';

/**
 * SVC_HOST=localhost: every address the name stands for is served by the app's one server. Here "localhost" is made
 * to stand for two loopback addresses (this machine's resolves to 127.0.0.1 alone; many resolve it to ::1 as well).
 */
const SECOND = '127.0.0.2';
const twoAddresses = async () => ['127.0.0.1', SECOND];

let svc: TestService;
before(async () => {
  svc = await startTestService();
  await svc.newPlatform(); // loopback on an allow-list: the firewall lets the tests in
});
after(() => svc?.close());

function publicApp() {
  return buildApp({ ...svc.runtime.appDeps!, metrics: new Registry() }, { public: true, admin: false });
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

test("each address of localhost gets the app's own answers, not a server of Node's defaults", async () => {
  const app = await publicApp();
  try {
    const url = await listenOn(app, { host: 'localhost', port: 0 }, assert.fail, twoAddresses);
    const { port } = new URL(url);
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

test('closing the app stops every address, with a keep-alive connection open on the second', async () => {
  const app = await publicApp();
  const url = await listenOn(app, { host: 'localhost', port: 0 }, assert.fail, twoAddresses);
  const port = Number(new URL(url).port);
  const idle = connect({ host: SECOND, port });
  await once(idle, 'connect');
  idle.write('GET /time HTTP/1.1\r\nHost: x\r\n\r\n');
  await once(idle, 'data'); // answered, and kept alive
  const ended = once(idle, 'close');
  await app.close();
  await ended; // the shutdown ended it (app.ts's closing connections), rather than waiting on the client
  const refused = connect({ host: SECOND, port });
  const [err] = (await once(refused, 'error').catch((e: unknown) => [e])) as [NodeJS.ErrnoException];
  assert.equal(err.code, 'ECONNREFUSED');
});

test('an address this machine does not have is skipped and reported; one taken by another process fails the listen', async () => {
  const absent = '192.0.2.1'; // TEST-NET-1: on no interface here
  const skipped: string[] = [];
  const app = await publicApp();
  try {
    const url = await listenOn(
      app,
      { host: 'localhost', port: 0 },
      (address, err) => skipped.push(`${address} ${(err as NodeJS.ErrnoException).code}`),
      async () => ['127.0.0.1', absent],
    );
    assert.deepEqual(skipped, [`${absent} EADDRNOTAVAIL`]);
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
      listenOn(second, { host: 'localhost', port }, assert.fail, twoAddresses),
      (err: NodeJS.ErrnoException) => err.code === 'EADDRINUSE' && err.syscall === 'listen',
    );
  } finally {
    await second.close();
    holder.close();
  }
});
