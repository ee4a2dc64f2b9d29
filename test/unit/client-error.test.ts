import assert from 'node:assert/strict';
import { PassThrough } from 'node:stream';
import { test } from 'node:test';
import { answerClientError } from '../../src/http/error-handler.ts';

/** The connection as Node's HTTP server hands it to the client-error handler, and what was written to it. */
function connection(headersSent?: boolean) {
  const socket = new PassThrough();
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
