import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { test } from 'node:test';
import { clientErrorAnswerer, type ClientErrorFirewall } from '../../src/http/error-handler.ts';

const answerClientError = clientErrorAnswerer();

/** The connection as Node's HTTP server hands it to the client-error handler, and what was written to it. */
function connection(headersSent?: boolean, remoteAddress = '192.0.2.1', url?: string, complete = false) {
  // Node's parser names a request once its headers are read (`incoming`, null before), until the next one's are.
  const socket = Object.assign(new PassThrough(), {
    remoteAddress,
    parser: { incoming: url === undefined ? null : { url, complete } },
  });
  const written: string[] = [];
  socket.on('data', (chunk) => written.push(String(chunk)));
  socket.on('error', () => {});
  if (headersSent !== undefined) Object.assign(socket, { _httpMessage: { headersSent } });
  return { socket, written: () => written.join('') };
}

const malformed = Object.assign(new Error('Parse Error: Invalid character in chunk size'), {
  code: 'HPE_INVALID_CHUNK_SIZE',
});

test('a parser error on an idle connection is answered with the 400 body, then the connection closes', async () => {
  const { socket, written } = connection();
  answerClientError(malformed, socket);
  await new Promise((resolve) => setImmediate(resolve));
  assert.match(written(), /^HTTP\/1\.1 400 Bad Request\r\n/);
  assert.ok(socket.destroyed);
});

test('a parser error after a response on the connection has begun writes nothing more, and closes it', async () => {
  const { socket, written } = connection(true);
  answerClientError(malformed, socket);
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(written(), '');
  assert.ok(socket.destroyed);
});

/** A firewall that lists `listed` only, with `proxy` as the one trusted proxy. */
function firewall(listed: string[], proxy = '10.0.0.1'): ClientErrorFirewall {
  return {
    allows: async (ip) => listed.includes(ip),
    isProxy: (ip) => ip === proxy,
    covers: (url) => url === undefined || !url.startsWith('/admin'),
  };
}

test('with the public firewall, a peer on no allow-list gets the 1020 instead (wire-contract §9)', async () => {
  const { socket, written } = connection();
  clientErrorAnswerer(firewall(['198.51.100.7']))(malformed, socket);
  await new Promise((resolve) => socket.once('close', resolve));
  assert.match(written(), /^HTTP\/1\.1 403 Forbidden\r\n/);
  assert.match(written(), /\r\n\r\nerror code: 1020$/);
});

test('a listed peer, a trusted proxy (its client unknown) or allow-lists that cannot be read: the 400', async () => {
  for (const [peer, rules] of [
    ['198.51.100.7', firewall(['198.51.100.7'])],
    ['10.0.0.1', firewall([])],
    [
      '192.0.2.1',
      { allows: () => Promise.reject(new Error('database gone')), isProxy: () => false, covers: () => true },
    ],
  ] as const) {
    const { socket, written } = connection(undefined, peer);
    clientErrorAnswerer(rules)(malformed, socket);
    await new Promise((resolve) => socket.once('close', resolve));
    assert.match(written(), /^HTTP\/1\.1 400 Bad Request\r\n/, peer);
  }
});

test('a request the firewall does not cover (the operator API on the same listener) gets its own answer', async () => {
  // Review: an operator's upload that came too slowly got the 1020, from an address on no platform's allow-list.
  const { socket, written } = connection(undefined, '192.0.2.1', '/admin/platforms');
  const timedOut = Object.assign(new Error('timeout'), { code: 'ERR_HTTP_REQUEST_TIMEOUT' });
  clientErrorAnswerer(firewall([]))(timedOut, socket);
  await new Promise((resolve) => socket.once('close', resolve));
  assert.match(written(), /^HTTP\/1\.1 408 Request Timeout\r\n/);
});

test('the request Node names once its message is complete is the one before: this one is not taken for it', async () => {
  // An operator request answered, then a malformed one on the same connection: not the operator's (review).
  const { socket, written } = connection(undefined, '192.0.2.1', '/admin/platforms', true);
  clientErrorAnswerer(firewall([]))(malformed, socket);
  await new Promise((resolve) => socket.once('close', resolve));
  assert.match(written(), /^HTTP\/1\.1 403 Forbidden\r\n/);
});

test('a blocked peer gets the 429 with Retry-After; one that reached the routes is not counted again', async () => {
  const decided: string[] = [];
  const limiting = (allowed: boolean): ClientErrorFirewall => ({
    ...firewall(['198.51.100.7']),
    limiter: {
      decide: (ip, done) => {
        decided.push(ip);
        done({ allowed, retryAfterMs: 7_500, blockStarted: false });
      },
    },
  });
  const blocked = connection(undefined, '198.51.100.7');
  clientErrorAnswerer(limiting(false))(malformed, blocked.socket);
  await new Promise((resolve) => blocked.socket.once('close', resolve));
  assert.match(blocked.written(), /^HTTP\/1\.1 429 Too Many Requests\r\n/);
  assert.match(blocked.written(), /\r\nretry-after: 8\r\n/);
  assert.match(blocked.written(), /\r\n\r\n\{"error":"Too Many Requests"\}$/);
  assert.deepEqual(decided, ['198.51.100.7']);
  // Its headers were read: the routes' hooks counted it already.
  const routed = connection(undefined, '198.51.100.7', '/trades');
  clientErrorAnswerer(limiting(false))(malformed, routed.socket);
  await new Promise((resolve) => routed.socket.once('close', resolve));
  assert.match(routed.written(), /^HTTP\/1\.1 400 Bad Request\r\n/);
  assert.deepEqual(decided, ['198.51.100.7']);
});

test('each answer is told to the log with the request id it carries; the one starting a block as such', async () => {
  // Log probe: the id of a 400 or 431 the parser refused was in no line, and the line of a 429 starting a block had none.
  type Fields = { reqId: string; statusCode: number; code: string | undefined; answered?: false };
  const told: Array<Fields & { blockStarted: boolean }> = [];
  const log = (fields: Fields, blockStarted: boolean) =>
    told.push({
      reqId: fields.reqId,
      statusCode: fields.statusCode,
      code: fields.code,
      answered: fields.answered,
      blockStarted,
    });
  const idOf = (answer: string) => /\r\nx-request-id: ([0-9a-f-]{36})\r\n/.exec(answer)?.[1];
  const starting: ClientErrorFirewall = {
    ...firewall(['198.51.100.7']),
    limiter: { decide: (_ip, done) => done({ allowed: false, retryAfterMs: 1_000, blockStarted: true }) },
  };
  const answers: string[] = [];
  for (const rules of [undefined, firewall([]), starting]) {
    const { socket, written } = connection(undefined, '198.51.100.7');
    clientErrorAnswerer(rules, log)(malformed, socket);
    await new Promise((resolve) => socket.once('close', resolve));
    answers.push(written());
  }
  assert.deepEqual(
    told.map(({ statusCode, code, blockStarted }) => [statusCode, code, blockStarted]),
    [
      [400, 'HPE_INVALID_CHUNK_SIZE', false],
      [403, 'HPE_INVALID_CHUNK_SIZE', false],
      [429, 'HPE_INVALID_CHUNK_SIZE', true],
    ],
  );
  assert.deepEqual(
    told.map((line) => line.reqId),
    answers.map(idOf),
  );
  // Nothing answered (a response had begun), nothing told.
  const { socket } = connection(true);
  clientErrorAnswerer(undefined, log)(malformed, socket);
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(told.length, 3);
  // But a block's start is told even when its 429 could not be written: the block holds all the same (review).
  const gone = connection(true, '198.51.100.7');
  clientErrorAnswerer(starting, log)(malformed, gone.socket);
  await new Promise((resolve) => setImmediate(resolve));
  assert.equal(gone.written(), '');
  assert.deepEqual(
    told.slice(3).map(({ statusCode, blockStarted, answered }) => [statusCode, blockStarted, answered]),
    [[429, true, false]],
  );
});
