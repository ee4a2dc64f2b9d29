import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { gzipSync } from 'node:zlib';
import { after, before, describe, test } from 'node:test';
import pg from 'pg';
import { ManualClock } from '../../src/lib/clock.ts';
import type { Runtime } from '../../src/main/runtime.ts';
import { startInstance } from '../helpers/instance.ts';
import {
  PROBE_THROW_MESSAGE,
  rawRequest,
  signedHeaders,
  startProbeApp,
  type ProbeApp,
  type RawResponse,
} from '../helpers/probe-app.ts';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.ts';
import { assertVendorSchema } from '../helpers/vendor-schema.ts';
import {
  startTestService,
  TEST_ADMIN_TOKEN,
  type PlatformFixture,
  type TestService,
} from '../helpers/test-service.ts';
import { newAccountHolder } from '../helpers/funding-fixtures.ts';
import { capturedLogger } from '../helpers/captured-log.ts';
import { rawHttp } from '../helpers/raw-http.ts';

/** wire-contract §3: the success envelope, every error body, X-REQUEST-ID on every response. */
const clock = new ManualClock(Date.UTC(2026, 5, 1, 12, 0, 0));
const nowS = () => Math.floor(clock.now() / 1000);
const UUID_V4 = /^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

const { logger, lines: logLines } = capturedLogger('info');

let svc: TestService;
let probe: ProbeApp;
let a: PlatformFixture;
let b: PlatformFixture;
let bZrn: string;
let aParticipant: string;

function signed(
  method: string,
  target: string,
  options: { body?: string | Buffer; headers?: Record<string, string>; key?: PlatformFixture['key'] } = {},
): Promise<RawResponse> {
  const headers = {
    ...signedHeaders(options.key ?? a.key, method, target, options.body, nowS()),
    ...(options.body !== undefined ? { 'content-type': 'application/json' } : {}),
    ...options.headers,
  };
  return rawRequest(probe.url, method, target, { headers, body: options.body });
}

function admin(method: string, target: string, body?: string | Buffer, headers: Record<string, string> = {}) {
  return rawRequest(svc.url, method, `/admin${target}`, {
    headers: {
      authorization: `Bearer ${TEST_ADMIN_TOKEN}`,
      ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
      ...headers,
    },
    body,
  });
}

/** The body is exactly `shape`'s keys with the given types/values. */
function assertBody(res: RawResponse, status: number, check: (body: Record<string, unknown>) => void) {
  assert.equal(res.status, status, res.text);
  assert.match(String(res.headers['content-type']), /application\/json/);
  check(res.json as Record<string, unknown>);
  assert.ok(res.headers['x-request-id'], 'every response carries X-REQUEST-ID');
}
const errorsBody = (body: Record<string, unknown>) => {
  assertVendorSchema(body, 'Code400');
  assert.deepEqual(Object.keys(body), ['errors']);
  assert.ok(Array.isArray(body.errors) && body.errors.length > 0);
  for (const e of body.errors as unknown[]) assert.equal(typeof e, 'string');
};
const errorBody = (text?: string) => (body: Record<string, unknown>) => {
  assert.deepEqual(Object.keys(body), ['error']);
  assert.equal(typeof body.error, 'string');
  if (text) assert.equal(body.error, text);
  if (text === 'Not Found') assertVendorSchema(body, 'Code404');
  if (text === 'Internal Server Error') assertVendorSchema(body, 'Code500');
  if (text === 'Service Unavailable') assertVendorSchema(body, 'Code503');
};
const forbiddenBody = (body: Record<string, unknown>) => {
  assertVendorSchema(body, 'Code403');
  assert.deepEqual(Object.keys(body).sort(), ['error', 'message']);
  assert.equal(body.error, true);
  assert.equal(typeof body.message, 'string');
};

before(async () => {
  svc = await startTestService({ clock, logger });
  probe = await startProbeApp(svc.runtime);
  a = await svc.newPlatform();
  b = await svc.newPlatform();
  aParticipant = (await svc.newParticipant(a.platform.platform_code)).participant_code;
  bZrn = (await newAccountHolder(svc, b.platform.platform_code)).zrn;
});
after(async () => {
  await probe?.close();
  await svc?.close();
});

describe('success envelope', () => {
  test('public, unauthenticated and operator answers are {"message": …}', async () => {
    const time = await rawRequest(probe.url, 'GET', '/time');
    assertBody(time, 200, (body) => assert.deepEqual(Object.keys(body), ['message']));
    const whoami = await signed('GET', '/probe/whoami');
    assertBody(whoami, 200, (body) => assert.deepEqual(Object.keys(body), ['message']));
    const created = await admin(
      'POST',
      '/platforms',
      JSON.stringify({ name: 'envelope', ip_allowlist: ['127.0.0.1/32'] }),
    );
    assertBody(created, 201, (body) => {
      assert.deepEqual(Object.keys(body), ['message']);
      assert.match((body.message as { platform_code: string }).platform_code, /^[A-Z0-9]{6}$/);
    });
    const list = await admin('GET', '/platforms');
    assertBody(list, 200, (body) => assert.ok(Array.isArray(body.message)));
  });
});

describe('error bodies', () => {
  test('400 {"errors": ["<field>: <problem>", …]} lists every bad field', async () => {
    const res = await admin('POST', '/platforms', JSON.stringify({ name: 5, ip_allowlist: 'x', extra: 1 }));
    assertBody(res, 400, (body) => {
      errorsBody(body);
      const errors = body.errors as string[];
      assert.ok(
        errors.some((e) => e.startsWith('name: ')),
        errors.join(),
      );
      assert.ok(
        errors.some((e) => e.startsWith('ip_allowlist: ')),
        errors.join(),
      );
      assert.ok(
        errors.some((e) => e.startsWith('extra: ')),
        errors.join(),
      );
    });
    const pub = await signed('POST', '/probe/echo', { body: '{"amount":12,"note":["x"]}' });
    assertBody(pub, 400, (body) => {
      errorsBody(body);
      const errors = body.errors as string[];
      assert.ok(
        errors.some((e) => e.startsWith('amount: ')),
        errors.join(),
      );
      assert.ok(
        errors.some((e) => e.startsWith('note: ')),
        errors.join(),
      );
    });
  });

  test("a value in the wrong form is named with the schema's words for the form, not its regex", async () => {
    const res = await admin(
      'POST',
      '/balances',
      JSON.stringify({ participant_code: 'x', account_label: 'general', asset: 'usd', amount: '1e3' }),
    );
    assertBody(res, 400, (body) => {
      const errors = body.errors as string[];
      assert.ok(
        errors.includes(
          'asset: is not in the expected form (a ledger asset in capitals and digits, up to 12 characters, without a network, e.g. USD or BTC (not BTC.BTC))',
        ),
        errors.join(),
      );
      assert.ok(errors.includes('amount: is not in the expected form (decimal string)'), errors.join());
      assert.ok(
        errors.includes('participant_code: is not in the expected form (6-character code)'),
        errors.join(),
      );
      assert.ok(!errors.some((e) => e.includes('^')), errors.join());
    });
  });

  test('401 {"error": reason}, public and operator', async () => {
    assertBody(await rawRequest(probe.url, 'GET', '/probe/whoami'), 401, errorBody());
    assertBody(await rawRequest(svc.url, 'GET', '/admin/platforms'), 401, errorBody());
    const wrongToken = await rawRequest(svc.url, 'GET', '/admin/platforms', {
      headers: { authorization: 'Bearer not-the-token' },
    });
    assertBody(wrongToken, 401, errorBody());
    // Two Authorization lines: Node kept the first, and a right token then a wrong one was served (review).
    const twice = await rawRequest(svc.url, 'GET', '/admin/platforms', {
      headers: { authorization: [`Bearer ${TEST_ADMIN_TOKEN}`, 'Bearer not-the-token'] },
    });
    assertBody(twice, 401, (body) =>
      assert.deepEqual(body, { error: 'header Authorization is given more than once (send it once)' }),
    );
  });

  test('403 {"error": true, "message": …}: another platform’s resource', async () => {
    assertBody(await signed('GET', `/probe/accounts/${bZrn}`), 403, forbiddenBody);
    assertBody(await signed('GET', `/probe/accounts/${bZrn}`, { key: b.key }), 200, (body) =>
      assert.equal((body.message as { zrn: string }).zrn, bZrn),
    );
  });

  test('404 {"error": "Not Found"}: unknown route, unknown method, unknown resource', async () => {
    assertBody(await signed('GET', '/no/such/route'), 404, errorBody('Not Found'));
    assertBody(await signed('PATCH', '/time', { body: '{}' }), 404, errorBody('Not Found'));
    // wire-contract §9: authentication before existence. Answered 404 to anyone, an unknown path or method told a
    // caller without credentials which routes there are (probe).
    assertBody(await rawRequest(probe.url, 'GET', '/no/such/route'), 401, errorBody());
    assertBody(await rawRequest(probe.url, 'PATCH', '/time'), 401, errorBody());
    const signedForAnother = signedHeaders(a.key, 'GET', '/time', undefined, nowS());
    assertBody(
      await rawRequest(probe.url, 'GET', '/no/such/route', { headers: signedForAnother }),
      401,
      errorBody('invalid signature'),
    );
    const unknownZrn = 'zrn:svc:us:account:customer:00000000-0000-4000-8000-000000000000';
    assertBody(await signed('GET', `/probe/accounts/${unknownZrn}`), 404, errorBody('Not Found'));
  });

  test('the operator API\'s 404 says what it did not find, beside the same "error"', async () => {
    assertBody(await admin('GET', '/no/such/thing'), 404, (body) =>
      assert.deepEqual(body, {
        error: 'Not Found',
        message: 'no operator API route GET /admin/no/such/thing',
      }),
    );
    assertBody(await admin('GET', '/platforms/ZZZZZ9'), 404, (body) =>
      assert.deepEqual(body, { error: 'Not Found', message: 'platform ZZZZZ9 not found' }),
    );
  });

  test('409 {"errors": [reason]}: duplicate entity', async () => {
    const body = JSON.stringify({
      platform_code: a.platform.platform_code,
      email: 'dup@example.com',
      first_name: 'D',
      last_name: 'Up',
    });
    assert.equal((await admin('POST', '/participants', body)).status, 201);
    assertBody(await admin('POST', '/participants', body), 409, errorsBody);
  });

  test('413 {"errors": ["body too large"]} over 1 MiB, public and operator; 1 MiB itself is read', async () => {
    const big = JSON.stringify({ amount: '1', note: 'x'.repeat(1024 * 1024) });
    assertBody(await signed('POST', '/probe/echo', { body: big }), 413, (body) =>
      assert.deepEqual(body, { errors: ['body too large'] }),
    );
    assertBody(await admin('POST', '/platforms', big), 413, (body) =>
      assert.deepEqual(body, { errors: ['body too large'] }),
    );
    // Exactly 1 MiB is within the limit: it reaches validation (note is too long) instead.
    const exact = '{"amount":"1","note":"' + 'x'.repeat(1024 * 1024 - 24) + '"}';
    assert.equal(Buffer.byteLength(exact), 1024 * 1024);
    assertBody(await signed('POST', '/probe/echo', { body: exact }), 400, errorsBody);
  });

  test('a request the HTTP parser refuses gets the 400 or 431 body with an X-REQUEST-ID, then the connection closes', async () => {
    const raw = (request: string) => rawHttp(svc.url, request, { untilClose: true });
    const cases = [
      // Unescaped UTF-8 in the request target, a NUL in a header, a Content-Length that is no number.
      [
        'GET /participants/jos\u00e9@x.com HTTP/1.1\r\nhost: x\r\n\r\n',
        400,
        'request: malformed HTTP request',
      ],
      ['GET /time HTTP/1.1\r\nhost: x\r\nx-a: a\u0000b\r\n\r\n', 400, 'request: malformed HTTP request'],
      [
        'POST /time HTTP/1.1\r\nhost: x\r\ncontent-length: abc\r\n\r\n',
        400,
        'request: malformed HTTP request',
      ],
      [
        `GET /time HTTP/1.1\r\nhost: x\r\nx-big: ${'a'.repeat(20_000)}\r\n\r\n`,
        431,
        'request: headers too large',
      ],
      // Node's own 400 for it had no body and no X-REQUEST-ID.
      ['GET /time HTTP/1.1\r\n\r\n', 400, 'host: an HTTP/1.1 request must carry a Host header'],
      // RFC 9112 §3.2: nor more than one (Node kept the first and served it: probe).
      [
        'GET /time HTTP/1.1\r\nhost: x\r\nHost: y\r\nconnection: close\r\n\r\n',
        400,
        'host: is given more than once (send it once)',
      ],
    ] as const;
    for (const [request, status, problem] of cases) {
      const answer = await raw(request);
      const [head = '', body] = answer.split('\r\n\r\n');
      assert.match(head, new RegExp(`^HTTP/1.1 ${status} `), answer.slice(0, 80));
      assert.match(head, /\r\nx-request-id: [0-9a-f-]{36}\r\n/i);
      assert.deepEqual(JSON.parse(body ?? ''), { errors: [problem] });
    }
  });

  test('a CONNECT request is answered as any other and its connection closed', async () => {
    // Node destroyed the socket unanswered: no status, no request id (probe).
    // The bytes after a CONNECT's head are the tunnel's, never a body, whatever it declares (review: a Content-Length
    // got a 400 before the 401).
    for (const [target, declared] of [
      ['/time', ''],
      ['127.0.0.1:443', ''],
      ['127.0.0.1:443', 'content-length: 5\r\n\r\nhello'],
    ]) {
      const rest = declared === '' ? '\r\n' : declared;
      const answer = await rawHttp(svc.url, `CONNECT ${target} HTTP/1.1\r\nhost: x\r\n${rest}`, {
        untilClose: true,
      });
      const [head = '', body] = answer.split('\r\n\r\n');
      assert.match(head, /^HTTP\/1.1 401 /, answer.slice(0, 80));
      assert.match(head, /\r\nx-request-id: [0-9a-f-]{36}\r\n/i);
      assert.match(head, /\r\nconnection: close$/im);
      assert.deepEqual(JSON.parse(body ?? ''), { error: 'missing header X-SCX-API-KEY' });
    }
    // A peer that resets the connection before the answer: an unhandled 'error' event ended the process (review).
    for (let round = 0; round < 5; round++) {
      const closed = new Promise<void>((resolve) => {
        const socket = connect(Number(new URL(svc.url).port), '127.0.0.1', () => {
          socket.write('CONNECT /time HTTP/1.1\r\nhost: x\r\n\r\n');
          setImmediate(() => socket.resetAndDestroy());
        });
        socket.on('error', () => {});
        socket.on('close', () => resolve());
      });
      await closed;
    }
    const after = await rawHttp(svc.url, 'GET /time HTTP/1.1\r\nhost: x\r\n\r\n');
    assert.match(after, /^HTTP\/1.1 200 /, 'still serving');
  });

  test('an expectation other than 100-continue is ignored: the request is served as any other', async () => {
    // Node answered a bare 417 itself, before any hook (probe).
    const answer = await rawHttp(svc.url, 'GET /time HTTP/1.1\r\nhost: x\r\nexpect: foo\r\n\r\n');
    assert.match(answer, /^HTTP\/1.1 200 /, answer.slice(0, 80));
    assert.match(answer, /\r\nx-request-id: /i);
    const body = JSON.parse(answer.split('\r\n\r\n')[1]!) as { message: { epoch: unknown } };
    assert.equal(typeof body.message.epoch, 'number');
  });

  test("a '#' in the request target → 400 saying so, after authentication", async () => {
    // The router read the fragment as query parameters: "x: is not allowed" for a parameter never sent (probe).
    for (const target of ['/probe/whoami#x', '/probe/whoami?a=1#x=2']) {
      assertBody(await signed('GET', target), 400, (body) =>
        assert.deepEqual(body, {
          errors: [
            "request: the target has a '#' (a fragment is not sent in HTTP); encode a '#' in a value as %23",
          ],
        }),
      );
    }
    assertBody(await rawRequest(probe.url, 'GET', '/probe/whoami#x'), 401, errorBody());
  });

  test('the routes without authentication check their input as every other: a #, malformed percent-encoding', async () => {
    // They ran none of the checks authentication is followed by: each of these was a 200 (probe).
    for (const [target, line] of [
      [
        '/time#x',
        "request: the target has a '#' (a fragment is not sent in HTTP); encode a '#' in a value as %23",
      ],
      [
        '/.well-known/jwks.json#frag',
        "request: the target has a '#' (a fragment is not sent in HTTP); encode a '#' in a value as %23",
      ],
      ['/time?%zz=1', 'query: has a parameter name that is not valid percent-encoded UTF-8'],
      ['/time?x=%FF', 'x: is not valid percent-encoded UTF-8'],
    ] as const) {
      assertBody(await rawRequest(probe.url, 'GET', target), 400, (body) =>
        assert.deepEqual(body, { errors: [line] }, target),
      );
    }
    // And the docs and the probes (review).
    for (const path of ['/docs/json', '/healthz', '/readyz', '/metrics']) {
      assert.equal((await rawRequest(probe.url, 'GET', `${path}#x`)).status, 400, path);
      assert.equal((await rawRequest(probe.url, 'GET', `${path}?x=%FF`)).status, 400, path);
      assert.equal((await rawRequest(probe.url, 'GET', path)).status, 200, path);
    }
    assert.equal((await rawRequest(probe.url, 'GET', '/time')).status, 200);
    assert.equal((await rawRequest(probe.url, 'GET', '/.well-known/jwks.json')).status, 200);
  });

  test('malformed JSON → 400 after authentication; unsigned → 401 first', async () => {
    const res = await signed('POST', '/probe/echo', { body: '{"amount": "1",' });
    assertBody(res, 400, (body) => assert.deepEqual(body, { errors: ['body: is not valid JSON'] }));
    const unsigned = await rawRequest(probe.url, 'POST', '/probe/echo', {
      headers: { 'content-type': 'application/json' },
      body: '{"amount": "1",',
    });
    assertBody(unsigned, 401, errorBody());
    const adminMalformed = await admin('POST', '/platforms', '{"name": ');
    assertBody(adminMalformed, 400, (body) =>
      assert.deepEqual(body, { errors: ['body: is not valid JSON'] }),
    );
    assertBody(
      await rawRequest(svc.url, 'POST', '/admin/platforms', { body: '{"name": ' }),
      401,
      errorBody(),
    );
  });

  test('a body that starts with a UTF-8 byte order mark is read as the JSON after it, signed as sent', async () => {
    const res = await signed('POST', '/probe/echo', { body: '\uFEFF{"amount":"1"}' });
    assertBody(res, 200, (body) =>
      assert.deepEqual(body, {
        message: { platform_code: a.platform.platform_code, body: { amount: '1' } },
      }),
    );
    // Only a leading one: elsewhere it is not JSON whitespace.
    assertBody(await signed('POST', '/probe/echo', { body: '{"amount":"1"}\uFEFF' }), 400, (body) =>
      assert.deepEqual(body, { errors: ['body: is not valid JSON'] }),
    );
  });

  test('a body that is not UTF-8 → 400 naming it, after authentication: never read with U+FFFD in its place', async () => {
    // "café" in Latin-1: the é is one byte that UTF-8 does not allow there.
    const latin1 = Buffer.concat([
      Buffer.from('{"amount":"1","note":"caf'),
      Buffer.from([0xe9]),
      Buffer.from('"}'),
    ]);
    const notUtf8 = ['body: is not valid UTF-8 text'];
    assertBody(await signed('POST', '/probe/echo', { body: latin1 }), 400, (body) =>
      assert.deepEqual(body, { errors: notUtf8 }),
    );
    assertBody(await admin('POST', '/platforms', latin1), 400, (body) =>
      assert.deepEqual(body, { errors: notUtf8 }),
    );
    const unsigned = await rawRequest(probe.url, 'POST', '/probe/echo', {
      headers: { 'content-type': 'application/json' },
      body: latin1,
    });
    assertBody(unsigned, 401, errorBody());
    // The same text in UTF-8 is read as sent.
    assertBody(await signed('POST', '/probe/echo', { body: '{"amount":"1","note":"café"}' }), 200, (body) =>
      assert.deepEqual(body, {
        message: { platform_code: a.platform.platform_code, body: { amount: '1', note: 'café' } },
      }),
    );
  });

  test('a transfer coding other than chunked → 400 naming it; chunked alone is read as sent', async () => {
    // Node's parser took the chunked coding off and ignored the gzip before it: read as plain (probe).
    // With an allow-list of its own: an empty one would open the firewall to every address for the other tests.
    const json = '{"name":"te","ip_allowlist":["198.51.100.9"]}';
    const chunked = `${json.length.toString(16)}\r\n${json}\r\n0\r\n\r\n`;
    const post = (coding: string) =>
      rawHttp(
        svc.url,
        `POST /admin/platforms HTTP/1.1\r\nhost: x\r\nauthorization: Bearer ${TEST_ADMIN_TOKEN}\r\n` +
          `content-type: application/json\r\ntransfer-encoding: ${coding}\r\nconnection: close\r\n\r\n${chunked}`,
        { untilClose: true },
      );
    const refused = await post('gzip, chunked');
    assert.match(refused, /^HTTP\/1.1 400 /, refused.slice(0, 80));
    assert.deepEqual(JSON.parse(refused.split('\r\n\r\n')[1]!), {
      errors: [
        'transfer-encoding: "gzip, chunked" is not supported; send the body with chunked alone, or with a content-length',
      ],
    });
    const served = await post('chunked');
    assert.match(served, /^HTTP\/1.1 201 /, served.slice(0, 80));
  });

  test('a compressed body (content-encoding) → 400 naming the encoding, after authentication; identity is read as sent', async () => {
    const json = '{"amount":"1"}';
    const gzipped = gzipSync(json);
    const refused = ['content-encoding: "gzip" is not supported; send the body uncompressed'];
    const compressed = await signed('POST', '/probe/echo', {
      body: gzipped,
      headers: { 'content-encoding': 'gzip' },
    });
    assertBody(compressed, 400, (body) => assert.deepEqual(body, { errors: refused }));
    assertBody(await admin('POST', '/platforms', gzipped, { 'content-encoding': 'gzip' }), 400, (body) =>
      assert.deepEqual(body, { errors: refused }),
    );
    const unsigned = await rawRequest(probe.url, 'POST', '/probe/echo', {
      headers: { 'content-type': 'application/json', 'content-encoding': 'gzip' },
      body: gzipped,
    });
    assertBody(unsigned, 401, errorBody());
    for (const identity of ['identity', 'Identity', '']) {
      assertBody(
        await signed('POST', '/probe/echo', { body: json, headers: { 'content-encoding': identity } }),
        200,
        (body) =>
          assert.deepEqual(body, {
            message: { platform_code: a.platform.platform_code, body: { amount: '1' } },
          }),
      );
    }
  });

  test('a key twice in one object → 400 naming it (JSON.parse would keep the last); the same key in two objects is fine', async () => {
    for (const [body, key] of [
      ['{"side":"buy","amount":"1","side":"sell"}', 'side'],
      ['{"amount":"1","note":{"a":1,"b":[{"x":1}],"\\u0061":2}}', 'a'],
      ['[{"amount":"1","amount":"2"}]', 'amount'],
    ] as const) {
      const twice = [`body: has the key "${key}" twice in one object`];
      assertBody(await signed('POST', '/probe/echo', { body }), 400, (res) =>
        assert.deepEqual(res, { errors: twice }),
      );
      assertBody(await admin('POST', '/platforms', body), 400, (res) =>
        assert.deepEqual(res, { errors: twice }),
      );
    }
    const fine =
      '{"amount":"1","note":{"amount":"2","list":[{"amount":"3"},{"amount":"4"}]},"x":"{\\"amount\\":1,"}';
    // Past the check, on to the route's schema (which takes no nested note): the same key in other objects, and a
    // quoted "amount" inside a string, are not duplicates.
    assertBody(await signed('POST', '/probe/echo', { body: fine }), 400, (res) =>
      assert.deepEqual(res, { errors: ['x: is not allowed', 'note: must be string'] }),
    );
  });

  test('a Content-Type that is no media type is read as JSON too: authentication first, then the body', async () => {
    for (const type of ['json', '', 'application', 'text/plain']) {
      const headers = { 'content-type': type };
      const res = await signed('POST', '/probe/echo', { body: '{"amount":"1"}', headers });
      assertBody(res, 200, (body) =>
        assert.deepEqual(body, {
          message: { platform_code: a.platform.platform_code, body: { amount: '1' } },
        }),
      );
      const unsigned = await rawRequest(probe.url, 'POST', '/probe/echo', {
        headers,
        body: '{"amount":"1"}',
      });
      assertBody(unsigned, 401, errorBody());
    }
  });

  test('a QUERY request without a Content-Type meets authentication first, as any other (RFC 10008 would 400 it)', async () => {
    for (const path of ['/accounts', '/time', '/no/such/route']) {
      const unsigned = await rawRequest(probe.url, 'QUERY', path, { body: '{}' });
      assertBody(unsigned, 401, errorBody());
      const bare = await rawRequest(probe.url, 'QUERY', path);
      assertBody(bare, 401, errorBody());
    }
    // Signed, it is what it is everywhere: a method no route takes.
    assertBody(await signed('QUERY', '/accounts'), 404, (body) =>
      assert.deepEqual(body, { error: 'Not Found' }),
    );
  });

  test('a body nested deeper than 32 levels → 400 naming it, after authentication, never a 500', async () => {
    const nested = (depth: number) => `{"amount":"1","note":${'['.repeat(depth)}${']'.repeat(depth)}}`;
    const tooDeep = ['body: is nested more than 32 levels deep'];
    // 10,000 levels overflowed the recursive input checks' stack: a 500.
    for (const depth of [32, 10_000]) {
      assertBody(await signed('POST', '/probe/echo', { body: nested(depth) }), 400, (body) =>
        assert.deepEqual(body, { errors: tooDeep }),
      );
      assertBody(await admin('POST', '/platforms', nested(depth)), 400, (body) =>
        assert.deepEqual(body, { errors: tooDeep }),
      );
    }
    assertBody(
      await rawRequest(probe.url, 'POST', '/probe/echo', {
        headers: { 'content-type': 'application/json' },
        body: nested(10_000),
      }),
      401,
      errorBody(),
    );
    // The body object itself is a level: 31 arrays inside it are the deepest accepted. Brackets inside
    // strings (escaped quotes included) are text, not nesting.
    const deepest = await signed('POST', '/probe/echo', { body: nested(31) });
    assert.notDeepEqual(deepest.json, { errors: tooDeep }, deepest.text);
    const text = JSON.stringify({ amount: '1', note: `\\"${'['.repeat(100)}` });
    const bracketsInText = await signed('POST', '/probe/echo', { body: text });
    assert.notDeepEqual(bracketsInText.json, { errors: tooDeep }, bracketsInText.text);
    assert.equal(
      bracketsInText.status,
      400,
      'the note is too long for the echo route, so it reaches validation',
    );
  });

  test('500 {"error": "Internal Server Error"} with no internals; the detail goes to the log', async () => {
    const res = await signed('GET', '/probe/throw', { headers: { 'x-request-id': 'trace-500-abc' } });
    assertBody(res, 500, errorBody('Internal Server Error'));
    assert.equal(res.text, '{"error":"Internal Server Error"}');
    assert.equal(res.text.includes('hunter2'), false);
    assert.equal(res.headers['x-request-id'], 'trace-500-abc');
    const logged = logLines.find((line) => line.includes(PROBE_THROW_MESSAGE.slice(0, 20)));
    assert.ok(logged, 'the error is logged');
    assert.equal((JSON.parse(logged) as { reqId: string }).reqId, 'trace-500-abc');
  });

  test('503 {"error": "Service Unavailable"} + svc-allow-retry: true when a lock cannot be taken', async () => {
    const client = new pg.Client({ connectionString: svc.database.url });
    await client.connect();
    try {
      await client.query('begin');
      await client.query('select 1 from participants where participant_code = $1 for update', [aParticipant]);
      const res = await signed('POST', `/probe/lock/${aParticipant}`);
      assertBody(res, 503, errorBody('Service Unavailable'));
      assert.equal(res.headers['svc-allow-retry'], 'true');
      await client.query('rollback');
      assert.equal((await signed('POST', `/probe/lock/${aParticipant}`)).status, 200);
    } finally {
      await client.end();
    }
  });
});

describe('503 when the database cannot take a write for want of resources', () => {
  test('a full disk or no memory is transient: 503 + svc-allow-retry, not a 500', async () => {
    // A full disk answered every write with 500 "Internal Server Error" (review, session 31).
    for (const sqlstate of ['53100', '53200']) {
      const res = await signed('POST', `/probe/resources/${sqlstate}`);
      assertBody(res, 503, errorBody('Service Unavailable'));
      assert.equal(res.headers['svc-allow-retry'], 'true', sqlstate);
    }
  });
});

describe('503 when the database takes no writes', () => {
  test('a read-only database (a standby after a failover) is transient: 503 + svc-allow-retry, not a 500', async () => {
    // Every write answered 500, "do not retry" (probe, session 41).
    const res = await signed('POST', '/probe/resources/25006');
    assertBody(res, 503, errorBody('Service Unavailable'));
    assert.equal(res.headers['svc-allow-retry'], 'true');
  });
});

describe('503 when the database is unreachable', () => {
  let proxy: TcpProxy;
  let instance: Runtime;
  let instanceProbe: ProbeApp;

  before(async () => {
    proxy = await startTcpProxy(svc.database.url);
    instance = await startInstance(svc, { databaseUrl: proxy.url, clock });
    instanceProbe = await startProbeApp(instance);
  });
  after(async () => {
    await instanceProbe?.close();
    await instance?.close();
    await proxy?.close();
  });

  test('public, authenticated and operator requests get 503 + svc-allow-retry, then recover', async () => {
    const whoami = () =>
      rawRequest(instanceProbe.url, 'GET', '/probe/whoami', {
        headers: signedHeaders(a.key, 'GET', '/probe/whoami', undefined, nowS()),
      });
    assert.equal((await whoami()).status, 200);
    await proxy.down();
    try {
      for (const res of [
        await rawRequest(instance.url!, 'GET', '/time'),
        await rawRequest(instance.url!, 'GET', '/admin/platforms', {
          headers: { authorization: `Bearer ${TEST_ADMIN_TOKEN}` },
        }),
        await whoami(),
      ]) {
        assertBody(res, 503, errorBody('Service Unavailable'));
        assert.equal(res.headers['svc-allow-retry'], 'true');
      }
    } finally {
      await proxy.up();
    }
    const deadline = Date.now() + 10_000;
    let res = await whoami();
    while (res.status !== 200 && Date.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, 100));
      res = await whoami();
    }
    assert.equal(res.status, 200, res.text);
  });
});

describe('X-REQUEST-ID on every response', () => {
  test('echoed when the caller sends one, on success and on every error', async () => {
    const id = 'client-req-42';
    const h = { 'x-request-id': id };
    const responses = [
      await rawRequest(probe.url, 'GET', '/time', { headers: h }),
      await rawRequest(probe.url, 'GET', '/nope', { headers: h }),
      await rawRequest(probe.url, 'GET', '/probe/whoami', { headers: h }),
      await signed('GET', '/probe/whoami', { headers: h }),
      await signed('POST', '/probe/echo', { body: '{}', headers: h }),
      await signed('GET', `/probe/accounts/${bZrn}`, { headers: h }),
      await admin('GET', '/platforms', undefined, h),
      await rawRequest(svc.url, 'GET', '/admin/platforms', { headers: h }),
      await rawRequest(svc.url, 'GET', '/healthz', { headers: h }),
    ];
    for (const res of responses) assert.equal(res.headers['x-request-id'], id, `${res.status} ${res.text}`);
  });

  test('one with bytes beyond ASCII (UTF-8) is echoed byte for byte, on success and on errors', async () => {
    // Node writes the header block as UTF-8 before a string body: `req-é` came back as `req-Ã©`, and such ids were
    // then not echoed at all, though onboarding keys on them (probe).
    const id = Buffer.from('req-é-日本', 'utf8');
    const answerTo = (url: string, target: string, headers = '') =>
      new Promise<Buffer>((resolve, reject) => {
        const { hostname, port } = new URL(url);
        const chunks: Buffer[] = [];
        // Not half-closed: node answers no request still in its hooks once the client has ended its side.
        const socket = connect({ host: hostname, port: Number(port) }, () =>
          socket.write(
            Buffer.concat([
              Buffer.from(`GET ${target} HTTP/1.1\r\nhost: x\r\n${headers}x-request-id: `),
              id,
              Buffer.from('\r\nconnection: close\r\n\r\n'),
            ]),
          ),
        );
        socket.on('data', (chunk: Buffer) => chunks.push(chunk));
        socket.on('close', () => resolve(Buffer.concat(chunks)));
        socket.on('error', reject);
      });
    const auth = signedHeaders(a.key, 'GET', '/probe/whoami', undefined, nowS());
    for (const [url, target, status, headers] of [
      [probe.url, '/time', 200, ''],
      [probe.url, '/nope', 401, ''],
      [probe.url, '/probe/whoami', 401, ''],
      [
        probe.url,
        '/probe/whoami',
        200,
        Object.entries(auth)
          .map(([k, v]) => `${k}: ${v}\r\n`)
          .join(''),
      ],
      [probe.url, '/time%zz', 401, ''],
      [svc.url, '/admin/platforms', 401, ''],
    ] as const) {
      const answer = await answerTo(url, target, headers);
      const head = answer.subarray(0, answer.indexOf('\r\n\r\n'));
      assert.match(head.toString('latin1'), new RegExp(`^HTTP/1.1 ${status} `), `${target}: ${head}`);
      const line = Buffer.concat([Buffer.from('\r\nx-request-id: '), id, Buffer.from('\r\n')]);
      assert.ok(answer.includes(line), `${target}: ${head.toString('latin1')}`);
    }
  });

  test('echoed on the firewall’s 1020', async () => {
    const res = await probe.app.inject({
      method: 'GET',
      url: '/time',
      headers: { 'x-request-id': 'from-a-stranger' },
      remoteAddress: '192.0.2.77',
    });
    assert.equal(res.body, 'error code: 1020');
    assert.equal(res.headers['x-request-id'], 'from-a-stranger');
    const generated = await probe.app.inject({ method: 'GET', url: '/time', remoteAddress: '192.0.2.77' });
    assert.match(String(generated.headers['x-request-id']), UUID_V4);
  });

  test('any id the caller sends is echoed as sent, up to 255 characters (onboarding keys on it)', async () => {
    for (const id of ['has spaces in it', 'a\ttab', 'abc/def', 'YWJj+ZGVm==', '{6f1c}', 'x'.repeat(255)]) {
      const h = { 'x-request-id': id };
      for (const res of [
        await rawRequest(probe.url, 'GET', '/time', { headers: h }),
        await rawRequest(probe.url, 'GET', '/nope', { headers: h }),
        await signed('GET', '/probe/whoami', { headers: h }),
      ]) {
        assert.equal(res.headers['x-request-id'], id, `${res.status} ${res.text}`);
      }
    }
  });

  test('a new UUIDv4 when absent, empty or longer than 255 characters, different for each request', async () => {
    const ids = new Set<string>();
    const variants: Array<Record<string, string>> = [
      {},
      { 'x-request-id': '' },
      { 'x-request-id': 'x'.repeat(256) },
    ];
    for (const headers of variants) {
      for (const res of [
        await rawRequest(probe.url, 'GET', '/time', { headers }),
        await rawRequest(probe.url, 'GET', '/nope', { headers }),
        await rawRequest(probe.url, 'GET', '/probe/whoami', { headers }),
      ]) {
        const id = String(res.headers['x-request-id']);
        assert.match(id, UUID_V4);
        ids.add(id);
      }
    }
    assert.equal(ids.size, 9);
  });
});

describe('X-REQUEST-ID on the rate limiter’s 429', () => {
  test('echoed, or generated, on a refused request', async () => {
    const limited = await startTestService({ clock, env: { SVC_RATE_LIMIT: '2' } });
    try {
      await limited.newPlatform();
      const app = limited.runtime.apps[0]!;
      const send = (headers: Record<string, string> = {}) =>
        app.inject({ method: 'GET', url: '/time', headers, remoteAddress: '127.0.0.1' });
      assert.equal((await send()).statusCode, 200);
      assert.equal((await send()).statusCode, 200);
      const refused = await send({ 'x-request-id': 'flood-3' });
      assert.equal(refused.statusCode, 429);
      assert.deepEqual(refused.json(), { error: 'Too Many Requests' });
      assert.equal(refused.headers['x-request-id'], 'flood-3');
      assert.match(String((await send()).headers['x-request-id']), UUID_V4);
    } finally {
      await limited.close();
    }
  });
});

describe('a request that does not arrive whole in time', () => {
  test('a body sent a byte at a time gets 408 and the connection is closed (SVC_HTTP_REQUEST_TIMEOUT_MS)', async () => {
    // It held the connection for good, unauthenticated: authentication waits for the whole body.
    const slow = await startTestService({ env: { SVC_HTTP_REQUEST_TIMEOUT_MS: '300' } });
    try {
      // A platform allowing loopback: the firewall lets the request through, to wait for its body.
      await slow.newPlatform();
      const answer = await new Promise<string>((resolve, reject) => {
        const { hostname, port } = new URL(slow.url);
        const socket = connect({ host: hostname, port: Number(port) }, () =>
          socket.write(
            'POST /liquidity/rfq HTTP/1.1\r\nhost: x\r\ncontent-type: application/json\r\ncontent-length: 100\r\n\r\n{',
          ),
        );
        let received = '';
        socket.on('data', (chunk) => (received += String(chunk)));
        socket.on('close', () => resolve(received));
        socket.on('error', reject);
        // Far beyond the bound and its check interval, on a busy machine too.
        setTimeout(() => socket.destroy(new Error('still open after 20 s')), 20_000).unref();
      });
      assert.match(answer, /^HTTP\/1.1 408 /);
    } finally {
      await slow.close();
    }
  });
});
