import assert from 'node:assert/strict';
import { once } from 'node:events';
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http';
import { createServer as createNetServer, type AddressInfo, type Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';
import {
  ANSWER_HEADERS_MAX_BYTES,
  createWebhookSender,
  type WebhookSender,
} from '../../src/domain/webhooks/webhook-sender.ts';

/**
 * Short, so that the deadline is reached quickly (the tests wait on events, never on sleeps), yet well above
 * a loopback round trip on a loaded machine (up to ~100 ms seen), which the tests that expect an answer need.
 */
const TIMEOUT_MS = 1_000;

/** A receiver on port 0 whose every answer is written by the test: `next()` hands over the next request. */
function startReceiver() {
  const waiting: Array<(exchange: { req: IncomingMessage; res: ServerResponse }) => void> = [];
  const arrived: Array<{ req: IncomingMessage; res: ServerResponse }> = [];
  const server = createServer((req, res) => {
    req.resume();
    req.on('end', () => {
      const exchange = { req, res };
      const take = waiting.shift();
      if (take) take(exchange);
      else arrived.push(exchange);
    });
  });
  return {
    server,
    async listen() {
      server.listen(0, '127.0.0.1');
      await once(server, 'listening');
      return `http://127.0.0.1:${(server.address() as AddressInfo).port}/hooks`;
    },
    next() {
      const ready = arrived.shift();
      if (ready) return Promise.resolve(ready);
      return new Promise<{ req: IncomingMessage; res: ServerResponse }>((resolve) => waiting.push(resolve));
    },
    async close() {
      server.closeAllConnections();
      server.close();
      await once(server, 'close');
    },
  };
}

/** Resolves when the response's connection is gone, and says whether the body had been ended by then. */
async function connectionGone(res: ServerResponse): Promise<{ ended: boolean }> {
  if (!res.destroyed) await once(res, 'close');
  return { ended: res.writableEnded };
}

/** One attempt, by a sender of its own, at a TCP server that answers its request's first bytes with `answer`. */
async function attemptAgainstRaw(answer: (socket: Socket) => void, scheme: 'http' | 'https' = 'http') {
  const server = createNetServer((socket) => {
    socket.on('error', () => {});
    socket.once('data', () => answer(socket));
  });
  server.listen(0, '127.0.0.1');
  await once(server, 'listening');
  const sender = createWebhookSender({ timeoutMs: 2_000 });
  try {
    return await sender.send({
      url: `${scheme}://127.0.0.1:${(server.address() as AddressInfo).port}/`,
      rawBody: '{}',
      headers: {},
    });
  } finally {
    await sender.close();
    server.close();
  }
}

describe('webhook sender: success is a 2xx status line within the timeout (wire-contract §5)', () => {
  const receiver = startReceiver();
  let url = '';
  let sender: WebhookSender;
  const send = () =>
    sender.send({ url, rawBody: '{"a":1}', headers: { 'content-type': 'application/json' } });

  before(async () => {
    url = await receiver.listen();
  });
  after(async () => {
    await receiver.close();
  });

  test('a 200 whose body is still open at the deadline is delivered once, and the body is cut at the deadline', async () => {
    sender = createWebhookSender({ timeoutMs: TIMEOUT_MS });
    try {
      const sending = send();
      const { res } = await receiver.next();
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write('ok'); // the rest of the body is never sent by this receiver
      const result = await sending;
      assert.equal(result.outcome, 'delivered');
      assert.equal(result.statusCode, 200);
      assert.equal(result.error, null);
      assert.ok(result.durationMs <= TIMEOUT_MS, `durationMs ${result.durationMs}`);
      // The tail is read off until the attempt's deadline, then the connection is dropped.
      assert.deepEqual(await connectionGone(res), { ended: false });
    } finally {
      await sender.close();
    }
  });

  test("a 2xx is the answer whatever its headers' size, up to a bound: a 100 KB set-cookie is delivered", async () => {
    // Probe: undici's default (16 KiB) recorded a 200 with a 17 KB cookie as UND_ERR_HEADERS_OVERFLOW, so the
    // receiver, which had taken it, got it again on every retry and it was dead-lettered.
    sender = createWebhookSender({ timeoutMs: TIMEOUT_MS });
    try {
      const sending = send();
      const { res } = await receiver.next();
      res.writeHead(200, { 'set-cookie': `session=${'a'.repeat(100 * 1024)}` });
      res.end('ok');
      const result = await sending;
      assert.deepEqual([result.outcome, result.statusCode, result.error], ['delivered', 200, null]);
      // Beyond the bound it is a failure that says why, not an answer held without end.
      const over = send();
      const { res: big } = await receiver.next();
      big.writeHead(200, { 'set-cookie': `session=${'a'.repeat(ANSWER_HEADERS_MAX_BYTES)}` });
      big.end('ok');
      const refused = await over;
      assert.equal(refused.outcome, 'failed');
      assert.match(refused.error ?? '', /HEADERS_OVERFLOW/);
    } finally {
      await sender.close();
    }
  });

  test('a 410 whose body is still open is `gone` at once', async () => {
    sender = createWebhookSender({ timeoutMs: TIMEOUT_MS });
    try {
      const sending = send();
      const { res } = await receiver.next();
      res.writeHead(410, { 'content-type': 'text/plain' });
      res.write('gone');
      const result = await sending;
      assert.equal(result.outcome, 'gone');
      assert.equal(result.statusCode, 410);
      assert.deepEqual(await connectionGone(res), { ended: false });
    } finally {
      await sender.close();
    }
  });

  test(
    'close() cuts a body still being read after its answer rather than waiting for it',
    { timeout: 5_000 },
    async () => {
      sender = createWebhookSender({ timeoutMs: 60_000 });
      const sending = send();
      const { res } = await receiver.next();
      res.writeHead(200);
      res.write('ok');
      assert.equal((await sending).outcome, 'delivered');
      await sender.close(); // would wait for the body (up to the 60 s timeout) if it did not cut it
      assert.deepEqual(await connectionGone(res), { ended: false });
    },
  );

  test('a status line that arrives after the timeout is a timeout with no status code', async () => {
    sender = createWebhookSender({ timeoutMs: TIMEOUT_MS });
    try {
      const sending = send();
      const { res } = await receiver.next();
      const result = await sending; // this receiver has not answered yet
      assert.equal(result.outcome, 'failed');
      assert.equal(result.statusCode, null);
      assert.equal(result.error, `timeout: no response within ${TIMEOUT_MS} ms`);
      // The attempt was cut: the receiver's late answer reaches nobody.
      assert.deepEqual(await connectionGone(res), { ended: false });
      res.writeHead(200);
      res.end();
    } finally {
      await sender.close();
    }
  });

  test('a non-2xx is failed with its status at its status line: a body then left open or cut does not lose it, nor what came of it', async () => {
    // It waited for the body: one left open was recorded as a timeout, one cut as "other side closed", both with
    // no status code, though the receiver had answered 500 at once (review).
    sender = createWebhookSender({ timeoutMs: TIMEOUT_MS });
    try {
      const open = send();
      const first = await receiver.next();
      first.res.writeHead(500, { 'content-type': 'text/plain' });
      first.res.write('broken');
      const result = await open;
      assert.deepEqual(
        [result.outcome, result.statusCode, result.error],
        ['failed', 500, 'HTTP 500: broken'],
      );
      assert.ok(result.durationMs < TIMEOUT_MS, `durationMs ${result.durationMs}`);

      const cut = send();
      const second = await receiver.next();
      second.res.writeHead(502, { 'content-length': '1000' });
      second.res.write('abc');
      const cutResult = await cut;
      second.res.destroy();
      assert.deepEqual(
        [cutResult.outcome, cutResult.statusCode, cutResult.error],
        ['failed', 502, 'HTTP 502: abc'],
      );
    } finally {
      await sender.close();
    }
  });

  test('interim answers (102 Processing, 103 Early Hints) are not the answer: the final 204 is', async () => {
    // Probe: the 103 was taken for the answer, so the attempt failed ("HTTP 103"), was retried and dead-lettered.
    sender = createWebhookSender({ timeoutMs: TIMEOUT_MS });
    try {
      const sending = send();
      const { res } = await receiver.next();
      res.writeProcessing();
      res.writeEarlyHints({ link: '</style.css>; rel=preload; as=style' });
      res.writeHead(204).end();
      const result = await sending;
      assert.deepEqual([result.outcome, result.statusCode, result.error], ['delivered', 204, null]);
    } finally {
      await sender.close();
    }
  });

  test('an unasked 100 Continue before the answer is a failed attempt that says so, not "bad response"', async () => {
    // undici refuses it (probe: every attempt of a receiver that answered 100 then 200 failed as "bad response").
    const result = await attemptAgainstRaw((socket) => {
      socket.write('HTTP/1.1 100 Continue\r\n\r\n');
      setTimeout(() => socket.end('HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok'), 20);
    });
    assert.deepEqual(
      [result.outcome, result.statusCode, result.error],
      [
        'failed',
        null,
        'HTTP 100 Continue before the answer: an interim answer this sender does not read (the receiver must send its final status alone)',
      ],
    );
  });

  test('a non-2xx with its body is a failed attempt with the status', async () => {
    sender = createWebhookSender({ timeoutMs: TIMEOUT_MS });
    try {
      const sending = send();
      const { res } = await receiver.next();
      res.writeHead(503, { 'content-type': 'text/plain' });
      res.end('later');
      const result = await sending;
      assert.deepEqual([result.outcome, result.statusCode, result.error], ['failed', 503, 'HTTP 503: later']);
    } finally {
      await sender.close();
    }
  });

  test("a 4xx or 5xx keeps the start of its body, the receiver's reason, as one printable line; a 410 and a 2xx do not wait for theirs", async () => {
    // Review: a receiver refusing the signature said why, and the operator saw "HTTP 400" only.
    sender = createWebhookSender({ timeoutMs: TIMEOUT_MS });
    const answered = async (status: number, body: string | Buffer) => {
      const sending = send();
      const { res } = await receiver.next();
      res.writeHead(status, { 'content-type': 'text/plain' });
      res.end(body);
      return (await sending).error;
    };
    try {
      assert.equal(
        await answered(400, '{"error":"signature does not match"}\r\n'),
        'HTTP 400: {"error":"signature does not match"}',
      );
      // Controls, line breaks and invisible characters are spaces; at most 200 bytes of the body.
      assert.equal(await answered(422, 'bad\u0007\n\n  \u202Etimestamp'), 'HTTP 422: bad timestamp');
      const long = await answered(500, `${'x'.repeat(300)}`);
      assert.equal(long, `HTTP 500: ${'x'.repeat(200)}`);
      // A character cut at the 200th byte is left out, not shown as a replacement character.
      assert.equal(await answered(500, `${'a'.repeat(199)}é`), `HTTP 500: ${'a'.repeat(199)}`);
      assert.equal(await answered(503, Buffer.from([0, 1, 2, 0xff])), 'HTTP 503');
      assert.equal(await answered(503, ''), 'HTTP 503');
      assert.equal(await answered(410, 'gone for good'), '410 Gone: retries stopped');

      // A body that does not come holds a failure up half a second at most, not to the timeout: the status is the
      // answer.
      const sending = send();
      const { res } = await receiver.next();
      res.writeHead(500, { 'content-length': '100' });
      res.flushHeaders();
      const result = await sending;
      res.destroy();
      assert.deepEqual([result.outcome, result.statusCode, result.error], ['failed', 500, 'HTTP 500']);
    } finally {
      await sender.close();
    }
  });
});

describe('webhook sender: stopping', () => {
  test('abortAll ends an attempt still connecting (a host that drops SYNs) as aborted, and close does not wait for it', async () => {
    let connecting!: () => void;
    const connectCalled = new Promise<void>((resolve) => (connecting = resolve));
    // A connector that never answers: what a receiver's host that drops SYNs looks like until the timeout.
    const sender = createWebhookSender({ timeoutMs: 60_000, connect: () => connecting() });
    const sending = sender.send({ url: 'http://192.0.2.1/hooks', rawBody: '{}', headers: {} });
    await connectCalled;
    sender.abortAll();
    // With the attempt ended at once, this bound only matters if it is not (it would wait the full minute).
    const bound = (ms: number) =>
      new Promise<'still pending'>((resolve) => setTimeout(() => resolve('still pending'), ms).unref());
    const result = await Promise.race([sending, bound(5_000)]);
    assert.notEqual(result, 'still pending');
    assert.equal((result as Awaited<typeof sending>).outcome, 'aborted');
    assert.equal(await Promise.race([sender.close().then(() => 'closed' as const), bound(5_000)]), 'closed');
  });

  test('an attempt still connecting at its deadline is a timeout then, not at the connect timeout after it', async () => {
    let connecting!: () => void;
    const connectCalled = new Promise<void>((resolve) => (connecting = resolve));
    // A connector that never answers (a host that drops SYNs); the connect timeout is 60 s, the attempt's 1 s.
    const sender = createWebhookSender({ timeoutMs: TIMEOUT_MS, connect: () => connecting() });
    try {
      const sending = sender.send({ url: 'http://192.0.2.1/hooks', rawBody: '{}', headers: {} });
      await connectCalled;
      // Bounded only so that a failure is reported rather than waited out: the attempt is expected at ~1 s. Not
      // unref'd: the sender's timers are, and nothing else keeps the test's event loop alive meanwhile.
      let timer!: NodeJS.Timeout;
      const bound = new Promise<'still pending'>((resolve) => {
        timer = setTimeout(() => resolve('still pending'), 30_000);
      });
      const result = await Promise.race([sending, bound]);
      clearTimeout(timer);
      assert.notEqual(result, 'still pending');
      const { outcome, error } = result as Awaited<typeof sending>;
      assert.deepEqual([outcome, error], ['failed', `timeout: no response within ${TIMEOUT_MS} ms`]);
    } finally {
      sender.abortAll();
      await sender.close();
    }
  });

  test('close may be called again: the second waits for the first rather than failing', async () => {
    // undici's close ends in a destroy, and it refuses to close a destroyed agent (ClientDestroyedError): a worker
    // stop, then a caller's own close in a finally, failed so (CI, session 17).
    const receiver = startReceiver();
    const url = await receiver.listen();
    const sender = createWebhookSender({ timeoutMs: TIMEOUT_MS });
    try {
      const sending = sender.send({ url, rawBody: '{}', headers: {} });
      (await receiver.next()).res.end();
      assert.equal((await sending).outcome, 'delivered');
      await sender.close();
      await sender.close();
      await Promise.all([sender.close(), sender.close()]);
    } finally {
      await receiver.close();
    }
    // And after an abort, when close destroys the agent rather than waiting for it.
    const aborted = createWebhookSender({ timeoutMs: 60_000, connect: () => {} });
    const sending = aborted.send({ url: 'http://192.0.2.1/hooks', rawBody: '{}', headers: {} });
    aborted.abortAll();
    await Promise.all([aborted.close(), aborted.close()]);
    await aborted.close();
    assert.equal((await sending).outcome, 'aborted');
  });
});

describe('webhook sender: slow attempts and odd answers', () => {
  test('onSlow is called once when an attempt runs past slowMs without its answer, never for one answered in time', async () => {
    const receiver = startReceiver();
    const url = await receiver.listen();
    const sender = createWebhookSender({ timeoutMs: 5_000, slowMs: 100 });
    try {
      let slowCalls = 0;
      const late = sender.send({ url, rawBody: '{}', headers: {}, onSlow: () => (slowCalls++, true) });
      const { res } = await receiver.next();
      // The sweep runs every 250 ms at most: the attempt is reported slow while it still waits.
      while (slowCalls === 0) await new Promise((resolve) => setTimeout(resolve, 20));
      res.writeHead(204).end();
      assert.equal((await late).outcome, 'delivered');
      assert.equal(slowCalls, 1);

      let quickCalls = 0;
      const quick = sender.send({ url, rawBody: '{}', headers: {}, onSlow: () => (quickCalls++, true) });
      const answered = await receiver.next();
      answered.res.writeHead(200);
      answered.res.write('still writing'); // answered; the body goes on past slowMs
      assert.equal((await quick).outcome, 'delivered');
      await new Promise((resolve) => setTimeout(resolve, 400));
      answered.res.end();
      assert.equal(quickCalls, 0, 'an answered attempt whose body runs on is not slow');
    } finally {
      await sender.close();
      await receiver.close();
    }
  });

  test('onSlow refused (it returns false: no room to park) is asked again at the next sweeps until it accepts', async () => {
    const receiver = startReceiver();
    const url = await receiver.listen();
    // A sweep every 5 ms (timeout / 20, at least 5).
    const sender = createWebhookSender({ timeoutMs: 100, slowMs: 10 });
    try {
      let calls = 0;
      const sending = sender.send({ url, rawBody: '{}', headers: {}, onSlow: () => ++calls >= 3 });
      const { res } = await receiver.next();
      while (calls < 3) await new Promise((resolve) => setTimeout(resolve, 5));
      await new Promise((resolve) => setTimeout(resolve, 30));
      assert.equal(calls, 3, 'asked until it accepted, then no more');
      res.writeHead(204).end();
      await sending;
    } finally {
      await sender.close();
      await receiver.close();
    }
  });

  test('an https URL to a receiver without TLS is a failed attempt that says so, without OpenSSL source paths', async () => {
    // Probe: the error recorded for the operator held OpenSSL's error queue and "../deps/openssl/…/ssl3_record.c:350".
    const result = await attemptAgainstRaw(
      (socket) => socket.end('HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\n\r\n'),
      'https',
    );
    assert.deepEqual(
      [result.outcome, result.statusCode, result.error],
      [
        'failed',
        null,
        'ERR_SSL_WRONG_VERSION_NUMBER: TLS: wrong version number (does the receiver speak TLS on that port? an https URL needs it)',
      ],
    );
  });

  test("a status line below 100, or a 101 nobody asked for, is a failed attempt with that status, not undici's assertion text", async () => {
    for (const [line, status] of [
      ['HTTP/1.1 099 Odd\r\ncontent-length: 0', 99],
      // Review: with the interim answers skipped, a 101 was recorded as "ERR_ASSERTION: … assert(upgrade)".
      ['HTTP/1.1 101 Switching Protocols', 101],
    ] as const) {
      const result = await attemptAgainstRaw((socket) => socket.end(`${line}\r\n\r\n`));
      assert.deepEqual(
        [result.outcome, result.statusCode, result.error],
        ['failed', status, `HTTP ${status}`],
      );
    }
  });
});
