import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { connect, type AddressInfo, type Socket } from 'node:net';
import { test } from 'node:test';
import { closingConnections } from '../../src/http/closing-connections.ts';

/**
 * A closing listener's connections that no whole request holds are closed once none is being answered
 * (src/http/closing-connections.ts), on a real server and real connections: the answers to /hold wait for the test.
 */
async function startServer() {
  const held: ServerResponse[] = [];
  const unread: Array<{ req: IncomingMessage; res: ServerResponse }> = [];
  const server = createServer((req, res) => {
    // Read only when the test says: as a request whose hooks are still at work (its body unread).
    if (req.url === '/read-later') return void unread.push({ req, res });
    req.resume();
    if (req.url === '/hold') held.push(res);
    // Answered once the body has come, as a route is.
    else req.once('end', () => res.end('ok'));
  });
  const connections = closingConnections(server);
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const { port } = server.address() as AddressInfo;
  /** A connection with `text` written, and whether the server has closed it. */
  const open = async (text: string) => {
    const socket: Socket = connect(port, '127.0.0.1');
    socket.on('error', () => {}); // a reset is a close too
    socket.on('data', () => {});
    await once(socket, 'connect');
    socket.write(text);
    let closed = false;
    const gone = new Promise<void>((resolve) => socket.once('close', () => resolve(void (closed = true))));
    return { socket, gone, closed: () => closed };
  };
  return {
    held,
    unread,
    open,
    connections,
    close: () => {
      server.closeAllConnections();
      server.close();
    },
  };
}

/** Runs `body` on a server of its own, closed after it. */
async function withServer(body: (s: Awaited<ReturnType<typeof startServer>>) => Promise<void>) {
  const s = await startServer();
  try {
    await body(s);
  } finally {
    s.close();
  }
}

/** Resolves once `condition` holds (checked at each turn of the event loop). */
async function until(condition: () => boolean) {
  while (!condition()) await new Promise((resolve) => setImmediate(resolve));
}

/** `gone`, or 'still open' after a bound that only a failure reaches (the close is expected at once). */
function closedOrNot(gone: Promise<void>): Promise<'closed' | 'still open'> {
  let timer!: NodeJS.Timeout;
  const bound = new Promise<'still open'>((resolve) => {
    timer = setTimeout(() => resolve('still open'), 10_000);
  });
  return Promise.race([gone.then(() => 'closed' as const), bound]).finally(() => clearTimeout(timer));
}

test('half a request, headers or body, is closed once no whole request is being answered', async () => {
  await withServer(async (s) => {
    const inFlight = await s.open('GET /hold HTTP/1.1\r\nHost: x\r\n\r\n');
    await until(() => s.held.length >= 1);
    const halfHeaders = await s.open('GET /time HTTP/1.1\r\nHost: x\r\n');
    const halfBody = await s.open('POST /x HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nabc');
    const silent = await s.open('');
    s.connections.startClosing();
    // The request being answered holds them: a request completed meanwhile would still get its answer.
    await new Promise((resolve) => setImmediate(resolve));
    assert.deepEqual([halfHeaders.closed(), halfBody.closed(), silent.closed()], [false, false, false]);
    s.held[0]!.end('done');
    for (const c of [halfHeaders, halfBody, silent, inFlight])
      assert.equal(await closedOrNot(c.gone), 'closed');
  });
});

test('a pipelined request whose connection went before its answer does not hold a later closing (review)', async () => {
  await withServer(async (s) => {
    const pipelined = await s.open(
      'GET /hold HTTP/1.1\r\nHost: x\r\n\r\nGET /hold HTTP/1.1\r\nHost: x\r\n\r\n',
    );
    await until(() => s.held.length >= 1);
    pipelined.socket.destroy();
    await pipelined.gone;
    const half = await s.open('GET /time HTTP/1.1\r\nHost: x\r\n');
    s.connections.startClosing();
    assert.equal(await closedOrNot(half.gone), 'closed');
  });
});

test('a whole request the server has not begun to read holds the closing and is answered (review)', async () => {
  // Past Node's buffer its body is left on the socket until read, so the request is not `complete` yet.
  await withServer(async (s) => {
    const body = 'x'.repeat(200_000);
    const client = await s.open(
      `POST /read-later HTTP/1.1\r\nHost: x\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
    );
    let answer = '';
    client.socket.on('data', (chunk: Buffer) => (answer += chunk.toString('latin1')));
    await until(() => s.unread.length >= 1);
    s.connections.startClosing();
    const { req, res } = s.unread[0]!;
    req.resume();
    await once(req, 'end');
    res.end('read');
    assert.equal(await closedOrNot(client.gone), 'closed');
    assert.match(answer, /^HTTP\/1\.1 200 OK\r\n/);
  });
});
