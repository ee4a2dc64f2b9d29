import assert from 'node:assert/strict';
import { getEventListeners } from 'node:events';
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { after, before, describe, test } from 'node:test';
import { AUTH_HEADERS, signingMessage, signRequest } from '../../src/contract/request-signature.ts';
import { eventually } from '../helpers/service-process.ts';
import {
  createClient,
  DEFAULT_RETRY_OPTIONS,
  SvcAbortedError,
  SvcArgumentError,
  SvcConnectionError,
  SvcError,
  SvcServerError,
} from 'svc-platform/sdk';

/**
 * The SDK's transport against real local HTTP servers: a redirect is an error, never followed with the
 * credentials; a call's `retry: false` means one send, and a client's `false` is not undone by a call's
 * other options.
 */
interface Recorder {
  url: string;
  requests: Array<{ method: string; url: string; headers: IncomingHttpHeaders }>;
  server: Server;
}

async function serve(answer: (res: import('node:http').ServerResponse) => void): Promise<Recorder> {
  return serveOn(0, answer);
}

async function serveOn(
  port: number,
  answer: (res: import('node:http').ServerResponse) => void,
): Promise<Recorder> {
  const requests: Recorder['requests'] = [];
  const server = createServer((req, res) => {
    requests.push({ method: req.method ?? '', url: req.url ?? '', headers: req.headers });
    req.resume();
    req.on('end', () => answer(res));
  });
  await new Promise<void>((resolve) => server.listen(port, '127.0.0.1', resolve));
  return { url: `http://127.0.0.1:${(server.address() as AddressInfo).port}`, requests, server };
}

let elsewhere: Recorder;
let redirecting: Recorder;
let unavailable: Recorder;
before(async () => {
  elsewhere = await serve((res) =>
    res.writeHead(200, { 'content-type': 'application/json' }).end('{"message":{}}'),
  );
  redirecting = await serve((res) => res.writeHead(307, { location: `${elsewhere.url}/stolen` }).end());
  unavailable = await serve((res) =>
    res.writeHead(503, { 'content-type': 'application/json' }).end('{"error":"Service Unavailable"}'),
  );
});
after(async () => {
  for (const r of [elsewhere, redirecting, unavailable])
    await new Promise((resolve) => r?.server.close(resolve));
});

const credentials = { apiKey: 'key-1', apiSecret: 'c2VjcmV0', passphrase: 'PASSPHRASE-SECRET' };
const noWaiting = { sleep: async () => {} };

test('a redirect is an error naming where it pointed; the credentials are not sent on', async () => {
  const client = createClient({ baseUrl: redirecting.url, ...credentials, retry: noWaiting });
  const error = await client.http
    .request('POST', '/client_auth_token', { body: { participant_code: 'ABC123', permissions: ['fwc'] } })
    .then(
      () => assert.fail('expected an error'),
      (e: unknown) => e,
    );
  assert.ok(error instanceof SvcError, String(error));
  assert.equal(error.status, 307);
  assert.match(error.message, new RegExp(`redirected to ${elsewhere.url}/stolen`));
  assert.equal(redirecting.requests.length, 1, 'sent once, not resent');
  assert.equal(elsewhere.requests.length, 0, 'nothing reached where the redirect pointed');
});

test("a call's retry: false is one send, whatever the client's retry options", async () => {
  const client = createClient({ baseUrl: unavailable.url, ...credentials, retry: noWaiting });
  const before = unavailable.requests.length;
  await assert.rejects(client.http.request('GET', '/trades', { retry: false }), SvcServerError);
  assert.equal(unavailable.requests.length - before, 1);
  // Without it, a 503 on a GET is resent (spec 7.1): 1 + 3.
  await assert.rejects(client.http.request('GET', '/trades'), SvcServerError);
  assert.equal(unavailable.requests.length - before, 5);
});

test('a client made with retry: false stays without resends when a call sets other retry options', async () => {
  const client = createClient({ baseUrl: unavailable.url, ...credentials, retry: false });
  const before = unavailable.requests.length;
  await assert.rejects(
    client.http.request('GET', '/trades', { retry: { allowRequote: true, ...noWaiting } }),
    SvcServerError,
  );
  assert.equal(unavailable.requests.length - before, 1);
  // A call that asks for resends itself gets them.
  await assert.rejects(
    client.http.request('GET', '/trades', { retry: { maxRetries: 2, ...noWaiting } }),
    SvcServerError,
  );
  assert.equal(unavailable.requests.length - before, 4);
});

test('an id of "." or ".." is refused before sending: the URL parser would send it to another route', async () => {
  const client = createClient({ baseUrl: unavailable.url, ...credentials, retry: false });
  const before = unavailable.requests.length;
  for (const id of ['.', '..', '']) {
    await assert.rejects(
      client.trades.get(id),
      (e: unknown) => e instanceof TypeError && /tradeId/.test(String(e)),
    );
    await assert.rejects(
      client.accounts.details(id),
      (e: unknown) => e instanceof TypeError && /zrn/.test(String(e)),
    );
    await assert.rejects(
      client.participants.getByEmail(id),
      (e: unknown) => e instanceof TypeError && /email/.test(String(e)),
    );
  }
  assert.equal(unavailable.requests.length, before, 'nothing was sent');
});

test('a timeoutMs beyond what a timer holds (2^31 - 1 ms) is refused when the client is made', () => {
  // Node fires such a timer at once: every attempt "timed out" after 1 ms, a write perhaps carried out.
  for (const timeoutMs of [2 ** 31, 3e9, 0, 1.5]) {
    assert.throws(() => createClient({ baseUrl: unavailable.url, ...credentials, timeoutMs }), RangeError);
  }
  assert.doesNotThrow(() =>
    createClient({ baseUrl: unavailable.url, ...credentials, timeoutMs: 2 ** 31 - 1 }),
  );
});

test('a baseUrl fetch cannot use is refused when the client is made, not retried as "no answer"', () => {
  for (const baseUrl of ['api.example.com', 'ftp://example.com', '', '127.0.0.1:8080'])
    assert.throws(
      () => createClient({ baseUrl, ...credentials }),
      (e: unknown) =>
        e instanceof TypeError && /^baseUrl must be an http or https URL/.test(String((e as Error).message)),
      baseUrl,
    );
  assert.doesNotThrow(() => createClient({ baseUrl: 'https://api.example.com/', ...credentials }));
  // Nor is a password in a URL that is not usable at all (review).
  for (const baseUrl of [
    'ftp://user:hunter2@example.com',
    'http://user:hun@ter2@host:99999',
    'http://u:hun#ter2@h:99999',
  ])
    assert.throws(
      () => createClient({ baseUrl, ...credentials }),
      (e: unknown) =>
        e instanceof TypeError && /\/\/…@/.test((e as Error).message) && !/ter2/.test((e as Error).message),
      baseUrl,
    );
  // fetch refuses a URL with credentials in it (probe: every call "no answer"); the password is not repeated.
  for (const baseUrl of ['http://user:hunter2@127.0.0.1:8080', 'https://user@api.example.com/v1'])
    assert.throws(
      () => createClient({ baseUrl, ...credentials }),
      (e: unknown) =>
        e instanceof TypeError &&
        /^baseUrl must not carry a user name or password/.test((e as Error).message) &&
        !/hunter2/.test((e as Error).message),
      baseUrl,
    );
  // Each call's path goes after it (probe: `?env=prod` sent POST /?env=prod/liquidity/execute); the query is not
  // repeated (it may hold a token).
  for (const [baseUrl, shown] of [
    ['http://127.0.0.1:8080?token=s3cret', 'http://127.0.0.1:8080/'],
    ['http://127.0.0.1:8080/#prod', 'http://127.0.0.1:8080/'],
    ['https://api.example.com/v1?', 'https://api.example.com/v1'],
  ])
    assert.throws(
      () => createClient({ baseUrl: baseUrl!, ...credentials }),
      (e: unknown) =>
        e instanceof TypeError &&
        (e as Error).message ===
          `baseUrl must not carry a query or fragment (each call adds its path after it), got ${JSON.stringify(shown)} with one`,
      baseUrl,
    );
  // Spaces, which URL() trims (review: "http://127.0.0.1:9/ " fetched "/ /time").
  for (const baseUrl of ['http://127.0.0.1:8080/ ', ' https://api.example.com', 'http://127.0.0.1:8080/v 1'])
    assert.throws(
      () => createClient({ baseUrl, ...credentials }),
      (e: unknown) =>
        e instanceof TypeError &&
        (e as Error).message === `baseUrl must not contain spaces, got ${JSON.stringify(baseUrl)}`,
      baseUrl,
    );
});

test('a baseUrl given as a URL object is used as its text; one neither text nor URL is refused at once', async () => {
  // Probe: a URL object passed the check (as its text), then every call failed as "no answer", a write's outcome
  // unknown though nothing was sent.
  const client = createClient({ baseUrl: new URL(`${elsewhere.url}/`), ...credentials, retry: noWaiting });
  const res = await client.http.send('GET', '/time');
  assert.equal(res.status, 200);
  assert.equal(elsewhere.requests.at(-1)!.url, '/time');
  for (const baseUrl of [42, null, undefined, { href: elsewhere.url }])
    assert.throws(
      () => createClient({ baseUrl: baseUrl as unknown as string, ...credentials }),
      (e: unknown) =>
        e instanceof SvcArgumentError &&
        /^baseUrl must be an http or https URL, as text or a URL, got /.test((e as Error).message),
      String(baseUrl),
    );
});

test('a path in baseUrl goes before every call’s path and is not signed, as for a proxy that strips it', async () => {
  // README SDK: the service behind such a proxy sees, and verifies, the call's path alone.
  const client = createClient({ baseUrl: `${elsewhere.url}/svc/`, ...credentials, retry: noWaiting });
  assert.equal((await client.http.send('GET', '/trades?page=1')).status, 200);
  const { url, headers } = elsewhere.requests.at(-1)!;
  assert.equal(url, '/svc/trades?page=1');
  const message = signingMessage(String(headers[AUTH_HEADERS.timestamp]), 'GET', '/trades?page=1', undefined);
  assert.equal(headers[AUTH_HEADERS.signed], signRequest(credentials.apiSecret, message));
});

test('credentials left out are refused by name when the client is made, not at its first call', () => {
  for (const name of ['apiKey', 'apiSecret', 'passphrase'] as const) {
    for (const value of [undefined, null, 42]) {
      assert.throws(
        () =>
          createClient({
            baseUrl: 'https://api.example.com',
            ...credentials,
            [name]: value as unknown as string,
          }),
        (e: unknown) =>
          e instanceof SvcArgumentError &&
          new RegExp(`^${name} must be a string, got `).test((e as Error).message),
        `${name}: ${value}`,
      );
    }
  }
});

test('a header value that cannot be sent is refused naming the header, nothing sent, not an unknown outcome', async () => {
  const before = elsewhere.requests.length;
  for (const passphrase of ['pass\nphrase', 'pässphrase✓']) {
    const client = createClient({ baseUrl: elsewhere.url, ...credentials, passphrase, retry: noWaiting });
    await assert.rejects(
      client.participants.createCustomer({ email: 'a@example.com' } as never),
      (e: unknown) => {
        assert.ok(e instanceof TypeError, String(e));
        assert.match((e as Error).message, /^header X-SCX-PASSPHRASE: its value cannot be sent/i);
        assert.equal((e as Error).message.includes(passphrase), false, 'the value is not echoed');
        return true;
      },
    );
  }
  assert.equal(elsewhere.requests.length, before, 'nothing was sent');
});

test('a header name that cannot be sent is refused naming it, nothing sent, not an unknown outcome', async () => {
  const before = elsewhere.requests.length;
  for (const name of ['X Tenant', 'X-Tenant:', 'X-Ténant', '']) {
    const client = createClient({ baseUrl: elsewhere.url, ...credentials, retry: noWaiting });
    await assert.rejects(
      client.http.request('POST', '/fund/rfq', { body: {}, headers: { [name]: 'v' } }),
      (e: unknown) => {
        assert.ok(e instanceof SvcArgumentError, String(e));
        assert.match((e as Error).message, /: not a header name/);
        return true;
      },
    );
  }
  assert.equal(elsewhere.requests.length, before, 'nothing was sent');
});

test('a header value that is not text is refused naming the header, nothing sent; one left undefined is not sent', async () => {
  const before = elsewhere.requests.length;
  for (const value of [{ a: 1 }, 42, null]) {
    const client = createClient({ baseUrl: elsewhere.url, ...credentials, retry: noWaiting });
    await assert.rejects(
      client.http.request('POST', '/fund/rfq', {
        body: {},
        headers: { 'X-Tenant': value as unknown as string },
      }),
      (e: unknown) =>
        e instanceof SvcArgumentError &&
        /^header X-Tenant: its value must be a string, got (object|number|null)$/.test((e as Error).message),
      String(value),
    );
  }
  assert.equal(elsewhere.requests.length, before, 'nothing was sent');
  // An optional header from the environment, unset: left out, as an undefined query parameter is (probe: it went
  // as the text "undefined").
  const client = createClient({
    baseUrl: elsewhere.url,
    ...credentials,
    headers: { 'X-Simulator-Scenario': undefined },
    retry: noWaiting,
  });
  await client.http.send('GET', '/time', { headers: { 'X-Tenant': undefined } });
  const sent = elsewhere.requests.at(-1)!.headers;
  assert.equal(sent['x-simulator-scenario'], undefined);
  assert.equal(sent['x-tenant'], undefined);
});

test('a path fetch would send otherwise is refused before sending: its signature could not match', async () => {
  // Review: `http.send` signed the path as given and fetch sent it percent-encoded, without its #…, or with its
  // `..` resolved: a 401 "invalid signature" that blamed the credentials; without its leading "/", a write of
  // unknown outcome that was never sent.
  const client = createClient({ baseUrl: elsewhere.url, ...credentials, retry: false });
  const before = elsewhere.requests.length;
  for (const [path, message] of [
    ['/participants/é@x.com', /would be sent as "\/participants\/%C3%A9@x.com".*encodeURIComponent/],
    ['/participants/a b@x.com', /would be sent as "\/participants\/a%20b@x.com"/],
    ['/participants/a"b', /would be sent as/],
    ['/participants/a#b', /would be sent as "\/participants\/a" \(without its #…\)/],
    ['/x/../trades', /would be sent as "\/trades"/],
    ['/trades?x=a b', /would be sent as "\/trades\?x=a%20b"/],
    ['fund/rfq', /path must start with one "\/", got "fund\/rfq"/],
    ['//elsewhere.example/trades', /path must start with one "\/"/],
  ] as const) {
    await assert.rejects(
      client.http.send('GET', path),
      (e: unknown) => e instanceof SvcArgumentError && message.test((e as Error).message),
      path,
    );
    await assert.rejects(client.http.request('POST', path, { body: {} }), SvcArgumentError, path);
  }
  // From JavaScript: a method or path of another type is named (review: an internal TypeError of `toUpperCase`).
  const untyped = client.http as unknown as {
    send(...args: unknown[]): Promise<unknown>;
    request(...args: unknown[]): Promise<unknown>;
  };
  await assert.rejects(
    untyped.request(undefined, '/time'),
    (e: unknown) =>
      e instanceof SvcArgumentError &&
      /^method must be a string, got undefined: request\(method, path, options\)$/.test((e as Error).message),
  );
  await assert.rejects(
    untyped.send('GET', 5),
    (e: unknown) =>
      e instanceof SvcArgumentError && /^path must be a string, got number/.test((e as Error).message),
  );
  await assert.rejects(
    untyped.send({ method: 'GET', path: '/time' }),
    (e: unknown) =>
      e instanceof SvcArgumentError &&
      /^method must be a string, got object: send\(method, path, options\)$/.test((e as Error).message),
  );
  assert.equal(elsewhere.requests.length, before, 'nothing was sent');
  // As the resource methods send them: encoded segments, and a query built from `query`.
  for (const path of ['/participants/%C3%A9%40x.com', '/participants/a|b', "/participants/o'neil"]) {
    assert.equal((await client.http.send('GET', path, { query: { page: 2, q: 'a b' } })).status, 200);
    assert.equal(elsewhere.requests.at(-1)!.url, `${path}?page=2&q=a+b`);
  }
});

test('a method in lower case is sent as signed, in upper case; a client-wide header and a call’s of the same name are one', async () => {
  const client = createClient({
    baseUrl: elsewhere.url,
    ...credentials,
    headers: { 'X-Request-Id': 'client-wide' },
    retry: noWaiting,
  });
  const res = await client.http.send('get', '/time', { headers: { 'x-request-id': 'per-call' } });
  assert.equal(res.status, 200);
  const sent = elsewhere.requests.at(-1)!;
  assert.equal(sent.method, 'GET');
  assert.equal(sent.headers['x-request-id'], 'per-call');
});

describe("a call's signal", () => {
  let hanging: Recorder;
  before(async () => {
    hanging = await serve(() => {}); // never answers
  });
  after(async () => {
    hanging?.server.closeAllConnections();
    await new Promise((resolve) => hanging?.server.close(resolve));
  });

  const rejection = (call: Promise<unknown>) =>
    call.then(
      () => assert.fail('expected the call to be aborted'),
      (e: unknown) => e,
    );

  test('aborted already: nothing is sent, and nothing happened', async () => {
    const client = createClient({ baseUrl: hanging.url, ...credentials, retry: noWaiting });
    const before = hanging.requests.length;
    const error = await rejection(
      client.http.request('POST', '/liquidity/execute', { body: {}, signal: AbortSignal.abort('gone') }),
    );
    assert.ok(error instanceof SvcAbortedError, String(error));
    assert.equal(error.cause, 'gone');
    assert.equal(error.outcomeUnknown, undefined);
    assert.equal(hanging.requests.length, before);
  });

  test('ends the attempt under way, long before its timeout; a write sent may have been carried out', async () => {
    const client = createClient({ baseUrl: hanging.url, ...credentials, retry: noWaiting });
    for (const method of ['POST', 'GET'] as const) {
      const before = hanging.requests.length;
      const controller = new AbortController();
      const call = rejection(
        client.http.request(method, '/liquidity/execute', {
          body: method === 'POST' ? {} : undefined,
          signal: controller.signal,
        }),
      );
      // The server holds the request: then the caller gives up.
      await eventually(
        async () => hanging.requests.length > before || undefined,
        10_000,
        'the request arriving',
      );
      controller.abort(new Error('user left'));
      const error = await call;
      assert.ok(error instanceof SvcAbortedError, String(error));
      assert.equal((error.cause as Error).message, 'user left');
      // Not retried as "no answer": one request.
      assert.equal(hanging.requests.length, before + 1);
      assert.equal(error.outcomeUnknown, method === 'POST' ? true : undefined, method);
    }
  });

  test('one long-lived signal passed to every call keeps nothing of them', async () => {
    // Review: each attempt combined it with its timeout by AbortSignal.any, which on Node 20 leaves an entry on the
    // caller's signal for good: an app's shutdown signal, passed to every call, grew by one per call.
    const client = createClient({ baseUrl: elsewhere.url, ...credentials, retry: false });
    const app = new AbortController();
    for (let i = 0; i < 200; i++)
      assert.equal((await client.http.send('GET', '/time', { signal: app.signal })).status, 200);
    assert.equal(getEventListeners(app.signal, 'abort').length, 0, 'no listener left on it');
    // Node's own record of the signals made of it (where this Node keeps one under that name).
    const dependants = Object.getOwnPropertySymbols(app.signal).find(
      (s) => s.description === 'kDependantSignals',
    );
    const kept =
      dependants && (app.signal as unknown as Record<symbol, Set<unknown> | undefined>)[dependants];
    assert.equal(kept ? kept.size : 0, 0, 'signals made of it, one per call');
  });

  test('an attempt that gets no answer within timeoutMs ends as timed out', async () => {
    const client = createClient({ baseUrl: hanging.url, ...credentials, retry: false, timeoutMs: 100 });
    const app = new AbortController();
    for (const signal of [undefined, app.signal]) {
      const error = await rejection(client.http.send('GET', '/time', { signal }));
      assert.ok(error instanceof SvcConnectionError, String(error));
      assert.equal(error.message, 'GET /time: timed out');
    }
    assert.equal(getEventListeners(app.signal, 'abort').length, 0);
  });

  test('the default wait ends, its timer gone, when the signal aborts', async () => {
    const timers = () => process.getActiveResourcesInfo().filter((r) => r === 'Timeout').length;
    const before = timers();
    const controller = new AbortController();
    const waiting = DEFAULT_RETRY_OPTIONS.sleep(3_600_000, controller.signal);
    assert.equal(timers(), before + 1);
    controller.abort();
    await waiting; // ends at once, not in an hour
    assert.equal(timers(), before);
  });

  test('ends a wait between attempts; resource methods take it too', async () => {
    const waits: number[] = [];
    const client = createClient({
      baseUrl: unavailable.url,
      ...credentials,
      // A wait that would never end by itself: only the signal ends it.
      retry: { sleep: (ms) => (waits.push(ms), new Promise<void>(() => {})) },
    });
    const before = unavailable.requests.length;
    const controller = new AbortController();
    const call = rejection(
      client.trades.get('7f0c1d2e-3333-4333-8333-333333333333', { signal: controller.signal }),
    );
    await eventually(async () => waits.length === 1 || undefined, 10_000, 'the wait after the 503');
    controller.abort();
    const error = await call;
    assert.ok(error instanceof SvcAbortedError, String(error));
    assert.match(error.message, /aborted while waiting to send again/);
    assert.equal(unavailable.requests.length - before, 1);
  });
});

test('a write whose connection was refused was never sent: resent after backoff as a 503, never of unknown outcome', async () => {
  // Probe: read as "no answer", a refused POST was not resent and was reported as possibly carried out.
  const closed = await serve(() => {});
  const port = (closed.server.address() as AddressInfo).port;
  await new Promise((resolve) => closed.server.close(resolve));
  const body = { participant_code: 'ABC123', fund_asset: 'BTC.BTC' };

  const waits: number[] = [];
  const down = createClient({
    baseUrl: closed.url,
    ...credentials,
    retry: { sleep: async (ms) => void waits.push(ms) },
  });
  const error = await down.http.request('POST', '/fund/rfq', { body }).then(
    () => assert.fail('expected an error'),
    (e: unknown) => e,
  );
  assert.ok(error instanceof SvcConnectionError, String(error));
  assert.equal(error.outcomeUnknown, undefined, 'nothing was sent');
  assert.equal(waits.length, DEFAULT_RETRY_OPTIONS.maxRetries, 'resent as many times as the budget allows');

  // The server back between two attempts (a restart): the resend is answered.
  let back: Recorder | undefined;
  const restarting = createClient({
    baseUrl: closed.url,
    ...credentials,
    retry: {
      sleep: async () => {
        back ??= await serveOn(port, (res) =>
          res.writeHead(200, { 'content-type': 'application/json' }).end('{"message":{"ok":true}}'),
        );
      },
    },
  });
  try {
    assert.deepEqual(await restarting.http.request('POST', '/fund/rfq', { body }), { message: { ok: true } });
    assert.equal(back!.requests.length, 1);
  } finally {
    if (back) await new Promise((resolve) => back!.server.close(resolve));
  }
});

test('a 2xx in none of this API\'s shapes is an error, not a result (a stand-in answering 200 {"foo":1})', async () => {
  const standIn = await serve((res) =>
    res.writeHead(200, { 'content-type': 'application/json' }).end('{"foo":1}'),
  );
  try {
    const client = createClient({ baseUrl: standIn.url, ...credentials, retry: noWaiting });
    // Resolved undefined, resolved {"foo":1} as an account created, and threw a TypeError.
    await assert.rejects(client.time(), SvcServerError);
    const create = await client.accounts
      .create({ participant_code: 'ABC123', account_label: 'general', type: 'individual', tier: 'pro' })
      .then(
        () => assert.fail('expected an error'),
        (e: unknown) => e,
      );
    assert.ok(create instanceof SvcServerError, String(create));
    assert.equal(create.outcomeUnknown, true);
    const execute = await client.quotes.executeLiquidityQuote(crypto.randomUUID()).then(
      () => assert.fail('expected an error'),
      (e: unknown) => e,
    );
    assert.ok(execute instanceof SvcError, String(execute));
  } finally {
    await new Promise((resolve) => standIn.server.close(resolve));
  }
});

test('path and query arguments of another type than a string are refused by name, nothing sent', async () => {
  const client = createClient({ baseUrl: elsewhere.url, ...credentials, retry: noWaiting });
  const before = elsewhere.requests.length;
  const refused = async (call: () => Promise<unknown>, pattern: RegExp) =>
    assert.rejects(call, (e: unknown) => e instanceof SvcArgumentError && pattern.test((e as Error).message));
  // Sent as /accounts/undefined/details, /trades/null and ?asset=[object Object].
  await refused(
    () => client.accounts.details(undefined as unknown as string),
    /^zrn: must be a string, got undefined/,
  );
  await refused(() => client.trades.get(null as unknown as string), /^tradeId: must be a string, got null/);
  await refused(
    () => client.http.request('GET', '/accounts', { query: { asset: {} as unknown as string } }),
    /^asset: a query parameter must be a string, number or boolean, got object/,
  );
  assert.equal(elsewhere.requests.length, before, 'nothing was sent');
});
