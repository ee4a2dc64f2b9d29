import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { ManualClock } from '../../src/lib/clock.ts';
import { capturedLogger } from '../helpers/captured-log.ts';
import { rawRequest, signedHeaders } from '../helpers/probe-app.ts';
import { rawHttp } from '../helpers/raw-http.ts';
import {
  startTestService,
  TEST_ADMIN_TOKEN,
  type PlatformFixture,
  type TestService,
} from '../helpers/test-service.ts';

/**
 * What a request's log line tells (README Operations, Logs), over real HTTP through a whole service: strangers'
 * refusals do not make a line at info each, and the URL keeps no participant's email, no value a route does not
 * take and no more than 512 characters (log probe: 45 MB of info lines in 3 s without credentials, emails at info).
 */
const clock = new ManualClock(Date.UTC(2026, 5, 1, 12, 0, 0));
const { logger, lines } = capturedLogger('debug');

let svc: TestService;
let platform: PlatformFixture;

interface RequestLine {
  level: number;
  url: string;
  statusCode: number;
  remoteAddress: string;
  msg: string;
  simulated?: string;
  platform?: string;
  apiKeyPrefix?: string;
}
const INFO = 30;
const DEBUG = 20;

/** The `request completed` lines written since `from` (an index into `lines`). */
function requestLines(from: number): RequestLine[] {
  return lines
    .slice(from)
    .map((line) => JSON.parse(line) as RequestLine)
    .filter((line) => line.msg === 'request completed');
}

/** A request from `source` (through the trusted proxy the test service is behind). */
function from(source: string, target: string, headers: Record<string, string> = {}) {
  return rawRequest(svc.url, 'GET', target, { headers: { ...headers, 'x-forwarded-for': source } });
}

before(async () => {
  svc = await startTestService({ clock, logger, env: { SVC_TRUST_PROXY: '127.0.0.1/32' } });
  platform = await svc.newPlatform({ allowlist: ['198.51.100.0/24', '2001:db8:1::/48'] });
});
after(async () => {
  await svc?.close();
});

describe('refusals of callers without credentials', () => {
  test("the firewall's 403: a source's first at info, the rest of 10 s at debug; each source its own", async () => {
    const start = lines.length;
    for (let i = 0; i < 20; i++) assert.equal((await from('192.0.2.1', '/time')).status, 403);
    assert.equal((await from('192.0.2.2', '/time')).status, 403);
    // An IPv6 source is its /64, as the rate limit counts it: a new address of it is no new source.
    assert.equal((await from('2001:db8:9:9::1', '/time')).status, 403);
    assert.equal((await from('2001:db8:9:9::2', '/time')).status, 403);
    const levels = (address: string) =>
      requestLines(start)
        .filter((line) => line.remoteAddress === address && line.statusCode === 403)
        .map((line) => line.level);
    assert.deepEqual(levels('192.0.2.1'), [INFO, ...Array<number>(19).fill(DEBUG)]);
    assert.deepEqual(levels('192.0.2.2'), [INFO]);
    assert.deepEqual([...levels('2001:db8:9:9::1'), ...levels('2001:db8:9:9::2')], [INFO, DEBUG]);
    clock.advance(10_000);
    const later = lines.length;
    assert.equal((await from('192.0.2.1', '/time')).status, 403);
    assert.deepEqual(
      requestLines(later).map((line) => line.level),
      [INFO],
      'at info again once its 10 s are over',
    );
  });

  test("the operator API's 401: a source's first at info, the rest at debug", async () => {
    const start = lines.length;
    const wrong = { authorization: 'Bearer wrong-token-wrong-token-wrong' };
    for (let i = 0; i < 5; i++)
      assert.equal((await from('203.0.113.5', '/admin/platforms', wrong)).status, 401);
    assert.deepEqual(
      requestLines(start).map((line) => [line.statusCode, line.level]),
      [[401, INFO], ...Array<[number, number]>(4).fill([401, DEBUG])],
    );
    // The operator's own requests are each at info.
    const own = lines.length;
    const authorized = { authorization: `Bearer ${TEST_ADMIN_TOKEN}` };
    for (let i = 0; i < 2; i++)
      assert.equal((await from('203.0.113.5', '/admin/platforms', authorized)).status, 200);
    assert.deepEqual(
      requestLines(own).map((line) => line.level),
      [INFO, INFO],
    );
  });

  test("a URL the router cannot read: the operator API's 400 and a stranger's public one, quieted alike", async () => {
    const start = lines.length;
    for (let i = 0; i < 4; i++) assert.equal((await from('192.0.2.60', '/admin/%ZZ')).status, 400);
    for (let i = 0; i < 3; i++) assert.equal((await from('192.0.2.61', '/nope%ZZ')).status, 403);
    const levels = (address: string) =>
      requestLines(start)
        .filter((line) => line.remoteAddress === address)
        .map((line) => line.level);
    assert.deepEqual(levels('192.0.2.60'), [INFO, DEBUG, DEBUG, DEBUG]);
    assert.deepEqual(levels('192.0.2.61'), [INFO, DEBUG, DEBUG]);
  });
});

describe('the URL a request line tells', () => {
  const signed = (target: string) =>
    from(
      '198.51.100.7',
      target,
      signedHeaders(platform.key, 'GET', target, undefined, Math.floor(clock.now() / 1000)),
    );

  test("an authenticated request's line names its platform and its API key's first characters, never the whole key", async () => {
    const start = lines.length;
    assert.equal((await signed('/participants?page=1')).status, 200);
    const [line] = requestLines(start);
    assert.deepEqual(
      [line!.platform, line!.apiKeyPrefix],
      [platform.platform.platform_code, platform.key.api_key.slice(0, 8)],
    );
    assert.ok(!lines.slice(start).some((text) => text.includes(platform.key.api_key)));
  });

  test("a participant's email is redacted in the path and in the query", async () => {
    const start = lines.length;
    assert.equal((await signed('/participants/grace.hopper%40mail.example')).status, 404);
    assert.equal((await signed('/participants/grace.hopper@mail.example')).status, 404);
    assert.equal((await signed('/participants?email=grace.hopper%40mail.example&page=2')).status, 200);
    assert.deepEqual(
      requestLines(start).map((line) => line.url),
      ['/participants/[redacted]', '/participants/[redacted]', '/participants?email=[redacted]&page=2'],
    );
    assert.ok(!lines.slice(start).some((line) => /grace/.test(line)), 'the email is in no line');
  });

  test('an email in a URL no route took is redacted too, however written', async () => {
    const start = lines.length;
    for (const target of [
      '/participants/grace.hopper@mail.example/',
      '//participants/grace.hopper%2540mail.example',
      '/PARTICIPANTS/grace.hopper%40mail.example',
      '/participants/grace.hopper@mail.example%ZZ',
      '/participants?grace.hopper%40mail.example=1&page=2',
      '/participants/grace.hopper%25%34%30mail.example',
      '/participants/grace.hopper%25%32%35%34%30mail.example',
      '/participants?email=x&page=grace.hopper%2525%34%30mail.example',
      '/participants/grace.hopper%252525252540mail.example',
    ])
      await signed(target);
    assert.deepEqual(
      requestLines(start).map((line) => line.url),
      [
        '/participants/[redacted]/',
        '//participants/[redacted]',
        '/PARTICIPANTS/[redacted]',
        '/participants/[redacted]',
        '/participants?[redacted]&page=2',
        '/participants/[redacted]',
        '/participants/[redacted]',
        '/participants?email=[redacted]&page=[redacted]',
        '/participants/[redacted]',
      ],
    );
    assert.ok(!lines.slice(start).some((line) => /grace/.test(line)), 'the email is in no line');
  });

  test("a beneficiary's names and a withdrawal address in a query are redacted; the route's other values stay", async () => {
    const start = lines.length;
    const query =
      'side=buy&underlying=BTC&quoted_currency=USD&quantity=1&withdrawal_address=bc1qgracehopper' +
      '&beneficiary_first_name=Grace&beneficiary_last_name=Hopper&beneficiary_business_name=Hopper%20LLC';
    await signed(`/convert_withdraw/rfq?${query}`);
    const [line] = requestLines(start);
    assert.equal(
      line!.url,
      '/convert_withdraw/rfq?side=buy&underlying=BTC&quoted_currency=USD&quantity=1&withdrawal_address=[redacted]' +
        '&beneficiary_first_name=[redacted]&beneficiary_last_name=[redacted]&beneficiary_business_name=[redacted]',
    );
  });

  test('values of query parameters the route does not take are redacted; the names stay', async () => {
    const start = lines.length;
    const token = 'AdminTokenSecretValue-0123456789abcdef';
    const authorized = { authorization: `Bearer ${TEST_ADMIN_TOKEN}` };
    await from('198.51.100.7', `/admin/platforms?token=${token}`, authorized);
    await from('198.51.100.7', `/admin/platforms?${token}`);
    assert.deepEqual(
      requestLines(start).map((line) => line.url),
      ['/admin/platforms?token=[redacted]', '/admin/platforms?[redacted]'],
    );
    assert.ok(!lines.slice(start).some((line) => line.includes(token)));
  });

  test("a deposit address is redacted in the operator's lookups, in the path as in the query", async () => {
    const start = lines.length;
    const authorized = { authorization: `Bearer ${TEST_ADMIN_TOKEN}` };
    await from('198.51.100.7', '/admin/deposit_addresses/bc1qgracehopper', authorized);
    // Not matched (404, 400): the address is redacted all the same.
    for (const target of [
      '/admin/deposit_addresses/bc1qgracehopper/',
      '/admin//deposit_addresses/bc1qgracehopper',
      '/admin/deposit_addresses/bc1qgracehopper%ZZ',
      '/admin/DEPOSIT%5FADDRESSES//bc1qgracehopper',
    ])
      await from('198.51.100.7', target, authorized);
    await from(
      '198.51.100.7',
      `/admin/deposits?deposit_address=bc1qgracehopper&transaction_id=${'ab'.repeat(32)}`,
      authorized,
    );
    assert.deepEqual(
      requestLines(start).map((line) => line.url),
      [
        '/admin/deposit_addresses/[redacted]',
        '/admin/deposit_addresses/[redacted]/',
        '/admin//deposit_addresses/[redacted]',
        '/admin/deposit_addresses/[redacted]',
        '/admin/DEPOSIT%5FADDRESSES//[redacted]',
        `/admin/deposits?deposit_address=[redacted]&transaction_id=${'ab'.repeat(32)}`,
      ],
    );
    assert.ok(!lines.slice(start).some((line) => line.includes('gracehopper')));
  });

  test('an answer X-Simulator-Scenario made says so (cert)', async () => {
    const start = lines.length;
    const target = '/participants?page=1';
    for (const scenario of ['error_500', 'error_502_after']) {
      const headers = signedHeaders(platform.key, 'GET', target, undefined, Math.floor(clock.now() / 1000));
      const res = await from('198.51.100.7', target, { ...headers, 'x-simulator-scenario': scenario });
      assert.equal(res.status, scenario === 'error_500' ? 500 : 502);
    }
    assert.equal((await signed(target)).status, 200);
    assert.deepEqual(
      requestLines(start).map((line) => [line.statusCode, line.simulated]),
      [
        [500, 'error_500'],
        [502, 'error_502_after'],
        [200, undefined],
      ],
    );
  });

  test('a URL is cut at 512 characters, saying how long it was', async () => {
    const start = lines.length;
    const path = `/${'a'.repeat(3_000)}`;
    // Unsigned: refused (401) before any route is looked for, as every unknown public path is.
    assert.equal((await from('198.51.100.7', path)).status, 401);
    const [line] = requestLines(start);
    assert.equal(line!.url, `${path.slice(0, 512)}… (3001 characters)`);
  });
});

describe('requests the HTTP parser refused', () => {
  test('a line with the id its answer carries (at debug)', async () => {
    const start = lines.length;
    const answer = await rawHttp(svc.url, 'GARBAGE\r\n\r\n', { untilClose: true });
    assert.match(answer, /^HTTP\/1\.1 400 /);
    const id = /\r\nx-request-id: ([^\r]+)\r\n/.exec(answer)?.[1];
    const line = lines
      .slice(start)
      .map((text) => JSON.parse(text) as { level: number; msg: string; reqId?: string; statusCode?: number })
      .find((entry) => entry.msg === 'request refused before parsing');
    assert.deepEqual([line?.level, line?.reqId, line?.statusCode], [DEBUG, id, 400]);
  });
});
