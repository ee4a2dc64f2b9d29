import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { FastifyInstance, LightMyRequestResponse } from 'fastify';
import { loadConfig } from '../../src/config.ts';
import { ManualClock } from '../../src/lib/clock.ts';
import { signedHeaders, startProbeApp, type ProbeApp } from '../helpers/probe-app.ts';
import { rawHttp } from '../helpers/raw-http.ts';
import { startTestService, type PlatformFixture, type TestService } from '../helpers/test-service.ts';

/**
 * wire-contract §2.1 (firewall 1020), §2.2 (per-platform allow-list 403) and §2.4 (source IP: the socket
 * peer, or the right-most untrusted X-Forwarded-For entry when the peer is a trusted proxy), through the
 * real public stack with `inject({ remoteAddress })`.
 */
const clock = new ManualClock(Date.UTC(2026, 5, 1, 12, 0, 0));
const nowS = () => Math.floor(clock.now() / 1000);

const A_IP = '198.51.100.7';
const A_IPV6 = '2001:db8::42';
const B_IP = '203.0.113.9';
const NOWHERE_IP = '192.0.2.1';
const PROXY_IP = '10.9.0.5';

type Key = PlatformFixture['key'];

function whoami(
  app: FastifyInstance,
  remoteAddress: string,
  options: { key?: Key; forwardedFor?: string } = {},
): Promise<LightMyRequestResponse> {
  const headers: Record<string, string> = options.key
    ? signedHeaders(options.key, 'GET', '/probe/whoami', undefined, nowS())
    : {};
  if (options.forwardedFor) headers['x-forwarded-for'] = options.forwardedFor;
  return app.inject({ method: 'GET', url: '/probe/whoami', headers, remoteAddress });
}

function assert1020(res: LightMyRequestResponse) {
  assert.equal(res.statusCode, 403, res.body);
  assert.match(String(res.headers['content-type']), /^text\/plain/);
  assert.equal(res.body, 'error code: 1020');
  assert.ok(res.headers['x-request-id']);
}

function assertAllowListRefusal(res: LightMyRequestResponse) {
  assert.equal(res.statusCode, 403, res.body);
  assert.match(String(res.headers['content-type']), /application\/json/);
  const body = res.json() as { error: unknown; message: unknown };
  assert.deepEqual(Object.keys(body).sort(), ['error', 'message']);
  assert.equal(body.error, true);
  assert.equal(typeof body.message, 'string');
}

function ipOf(res: LightMyRequestResponse): string {
  assert.equal(res.statusCode, 200, res.body);
  return (res.json() as { message: { ip: string } }).message.ip;
}

describe('firewall and allow-lists (no trusted proxy)', () => {
  let svc: TestService;
  let probe: ProbeApp;
  let a: PlatformFixture;
  let b: PlatformFixture;

  before(async () => {
    svc = await startTestService({ clock });
    probe = await startProbeApp(svc.runtime);
    a = await svc.newPlatform({ allowlist: [`${A_IP}/32`, '2001:db8::/32'] });
    b = await svc.newPlatform({ allowlist: ['203.0.113.0/24'] });
  });
  after(async () => {
    await probe?.close();
    await svc?.close();
  });

  test('an IP on no allow-list gets the 1020 text, before authentication, on every public route', async () => {
    assert1020(await whoami(probe.app, NOWHERE_IP, { key: a.key }));
    assert1020(await whoami(probe.app, NOWHERE_IP));
    assert1020(await probe.app.inject({ method: 'GET', url: '/time', remoteAddress: NOWHERE_IP }));
    assert1020(
      await probe.app.inject({
        method: 'POST',
        url: '/probe/echo',
        payload: 'not json',
        headers: { 'content-type': 'application/json' },
        remoteAddress: NOWHERE_IP,
      }),
    );
  });

  test('a path no route matches and a URL the router refuses get the 1020 too, not a map of the routes', async () => {
    for (const [method, url] of [
      ['GET', '/nope'],
      ['PUT', '/time'],
      ['GET', '/%zz'],
      ['GET', '/accounts/%zz/details'],
    ] as const) {
      assert1020(await probe.app.inject({ method, url, remoteAddress: NOWHERE_IP }));
    }
    // Refused before its body is read: a body too large (413) or not JSON (400) changes nothing.
    for (const payload of ['x'.repeat(1024 * 1024 + 1), '{not json']) {
      assert1020(
        await probe.app.inject({
          method: 'POST',
          url: '/nope',
          remoteAddress: NOWHERE_IP,
          headers: { 'content-type': 'application/json' },
          payload,
        }),
      );
    }
    // From an IP on an allow-list they meet authentication next (wire-contract §9), unknown path and refused URL alike.
    assert.equal(
      (await probe.app.inject({ method: 'GET', url: '/nope', remoteAddress: A_IP })).statusCode,
      401,
    );
    assert.equal(
      (await probe.app.inject({ method: 'GET', url: '/%zz', remoteAddress: A_IP })).statusCode,
      401,
    );
    // The operator API answers its own unknown paths, behind its token.
    const app = svc.runtime.apps[0]!;
    for (const url of ['/admin/nope', '/admin/%zz']) {
      const res = await app.inject({ method: 'GET', url, remoteAddress: NOWHERE_IP });
      assert.notEqual(res.body, 'error code: 1020', url);
    }
    assert.equal(
      (await app.inject({ method: 'GET', url: '/admin/nope', remoteAddress: NOWHERE_IP })).statusCode,
      401,
    );
  });

  test('an HTTP/1.1 request without a Host header meets the firewall first: 1020, not a 400', async () => {
    // Over a real connection (inject always sends a Host); loopback is on no allow-list here.
    const answer = await rawHttp(svc.url, 'GET /time HTTP/1.1\r\n\r\n');
    assert.match(answer, /^HTTP\/1.1 403 /);
    assert.equal(answer.split('\r\n\r\n')[1], 'error code: 1020');
  });

  test('a request the HTTP parser refuses meets the firewall first: 1020, not its 400 (probe)', async () => {
    // Loopback is on no allow-list here: a malformed request was the one way to learn that the service was there.
    // A public path the parser read before it failed (a bad chunk of the body):
    const answer = await rawHttp(
      svc.url,
      'POST /time HTTP/1.1\r\nhost: x\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n',
      { untilClose: true },
    );
    assert.match(answer, /^HTTP\/1.1 403 /, answer.slice(0, 80));
    assert.match(answer, /\r\nx-request-id: [0-9a-f-]{36}\r\n/i);
    assert.equal(answer.split('\r\n\r\n')[1], 'error code: 1020');
    // Where it failed before the path was read, this listener cannot tell it from one for the operator API or the
    // probes it also serves, outside the firewall: the parser's answer.
    const unread = await rawHttp(svc.url, 'GET /time HTTP/1.1\r\nhost: x\r\nx-a: a\u0000b\r\n\r\n', {
      untilClose: true,
    });
    assert.match(unread, /^HTTP\/1.1 400 /, unread.slice(0, 80));
    // A listener that serves the public API alone (the operator API and the probes on listeners of their own) can.
    const alone = await startTestService({
      clock,
      env: { SVC_ADMIN_LISTEN: '127.0.0.1:0', SVC_OPS_LISTEN: '127.0.0.1:0' },
    });
    try {
      await alone.newPlatform({ allowlist: [`${A_IP}/32`] });
      for (const request of [
        'GET /time HTTP/1.1\r\nhost: x\r\nx-a: a\u0000b\r\n\r\n',
        `GET /time HTTP/1.1\r\nhost: x\r\nx-big: ${'a'.repeat(20_000)}\r\n\r\n`,
      ]) {
        const refused = await rawHttp(alone.url, request, { untilClose: true });
        assert.match(refused, /^HTTP\/1.1 403 /, refused.slice(0, 80));
        assert.equal(refused.split('\r\n\r\n')[1], 'error code: 1020');
      }
    } finally {
      await alone.close();
    }
  });

  test("an expectation other than 100-continue meets the firewall: 1020, not Node's bare 417 (probe)", async () => {
    const answer = await rawHttp(svc.url, 'GET /time HTTP/1.1\r\nhost: x\r\nexpect: foo\r\n\r\n');
    assert.match(answer, /^HTTP\/1.1 403 /, answer.slice(0, 80));
    assert.match(answer, /\r\nx-request-id: /i);
    assert.equal(answer.split('\r\n\r\n')[1], 'error code: 1020');
  });

  test('the operator API and health routes are not behind the public firewall', async () => {
    const health = await svc.runtime.apps[0]!.inject({
      method: 'GET',
      url: '/healthz',
      remoteAddress: NOWHERE_IP,
    });
    assert.equal(health.statusCode, 200);
    const admin = await svc.runtime.apps[0]!.inject({
      method: 'GET',
      url: '/admin/platforms',
      remoteAddress: NOWHERE_IP,
    });
    assert.equal(admin.statusCode, 401);
  });

  test('an IP allowed for another platform only gets 403 JSON', async () => {
    assertAllowListRefusal(await whoami(probe.app, B_IP, { key: a.key }));
    assertAllowListRefusal(await whoami(probe.app, A_IP, { key: b.key }));
  });

  test('order: firewall passes an IP on some list, then authentication (401) comes before the allow-list', async () => {
    const res = await whoami(probe.app, B_IP);
    assert.equal(res.statusCode, 401);
    assert.equal(typeof (res.json() as { error: unknown }).error, 'string');
  });

  test('an IP on the caller’s allow-list is served (IPv4, IPv6 range, IPv4-mapped IPv6)', async () => {
    assert.equal(ipOf(await whoami(probe.app, A_IP, { key: a.key })), A_IP);
    assert.equal(ipOf(await whoami(probe.app, A_IPV6, { key: a.key })), A_IPV6);
    assert.equal(ipOf(await whoami(probe.app, `::ffff:${A_IP}`, { key: a.key })), `::ffff:${A_IP}`);
    assert.equal(ipOf(await whoami(probe.app, '203.0.113.200', { key: b.key })), '203.0.113.200');
  });

  test('X-Forwarded-For is ignored when no proxy is trusted', async () => {
    assert1020(await whoami(probe.app, NOWHERE_IP, { key: a.key, forwardedFor: A_IP }));
    assert.equal(ipOf(await whoami(probe.app, A_IP, { key: a.key, forwardedFor: NOWHERE_IP })), A_IP);
  });

  test('an allow-list change takes effect at once (firewall and allow-list)', async () => {
    await svc.admin.put(`/platforms/${a.platform.platform_code}/ip_allowlist`, {
      cidrs: [`${A_IP}/32`, '192.0.2.0/24'],
    });
    assert.equal(ipOf(await whoami(probe.app, NOWHERE_IP, { key: a.key })), NOWHERE_IP);
    await svc.admin.put(`/platforms/${a.platform.platform_code}/ip_allowlist`, {
      cidrs: [`${A_IP}/32`, '2001:db8::/32'],
    });
    assert1020(await whoami(probe.app, NOWHERE_IP, { key: a.key }));
  });

  test('invalid CIDRs are refused with 400 naming the entry', async () => {
    await assert.rejects(
      svc.admin.put(`/platforms/${a.platform.platform_code}/ip_allowlist`, {
        cidrs: ['10.0.0.0/8', '10.0.0.0/33', 'example.com'],
      }),
      (error: { status: number; body: { errors: string[] } }) => {
        assert.equal(error.status, 400);
        assert.ok(
          error.body.errors.some((e) => e.startsWith('cidrs[1]:')),
          JSON.stringify(error.body),
        );
        assert.ok(
          error.body.errors.some((e) => e.startsWith('cidrs[2]:')),
          JSON.stringify(error.body),
        );
        return true;
      },
    );
  });
});

describe('trusted proxies (SVC_TRUST_PROXY)', () => {
  let svc: TestService;
  let probe: ProbeApp;
  let a: PlatformFixture;
  let b: PlatformFixture;

  before(async () => {
    svc = await startTestService({ clock });
    const config = loadConfig({ ...process.env, SVC_TRUST_PROXY: '10.9.0.0/16, 172.16.0.1' });
    probe = await startProbeApp(svc.runtime, {
      config: { ...svc.runtime.config, trustProxy: config.trustProxy },
    });
    a = await svc.newPlatform({ allowlist: [`${A_IP}/32`, `${A_IPV6}/128`] });
    b = await svc.newPlatform({ allowlist: [`${B_IP}/32`] });
  });
  after(async () => {
    await probe?.close();
    await svc?.close();
  });

  test('from a trusted peer, the right-most untrusted X-Forwarded-For entry is the source IP', async () => {
    assert.equal(ipOf(await whoami(probe.app, PROXY_IP, { key: a.key, forwardedFor: A_IP })), A_IP);
    // A client may put anything in front; only the entry our proxy appended counts.
    const spoofedChain = `${B_IP}, ${NOWHERE_IP}, ${A_IP}`;
    assert.equal(ipOf(await whoami(probe.app, PROXY_IP, { key: a.key, forwardedFor: spoofedChain })), A_IP);
    // Trusted hops on the right are skipped.
    const viaTwoProxies = `${A_IP}, 10.9.0.3, 172.16.0.1`;
    assert.equal(ipOf(await whoami(probe.app, PROXY_IP, { key: a.key, forwardedFor: viaTwoProxies })), A_IP);
  });

  test('the right-most untrusted entry decides the firewall and the allow-list', async () => {
    assert1020(await whoami(probe.app, PROXY_IP, { key: a.key, forwardedFor: `${A_IP}, ${NOWHERE_IP}` }));
    assertAllowListRefusal(await whoami(probe.app, PROXY_IP, { key: a.key, forwardedFor: B_IP }));
    assert.equal(ipOf(await whoami(probe.app, PROXY_IP, { key: b.key, forwardedFor: B_IP })), B_IP);
  });

  test('a URL the router refuses meets the firewall as its client, not as the proxy', async () => {
    const refused = (forwardedFor: string) =>
      probe.app.inject({
        method: 'GET',
        url: '/%zz',
        remoteAddress: PROXY_IP,
        headers: { 'x-forwarded-for': forwardedFor },
      });
    // Past the firewall, unsigned: authentication's 401 (wire-contract §9).
    const allowed = await refused(A_IP);
    assert.equal(allowed.statusCode, 401, allowed.body);
    assert.deepEqual(allowed.json(), { error: 'missing header X-SCX-API-KEY' });
    assert1020(await refused(NOWHERE_IP));
  });

  test("an entry written with the client's port (as some proxies write it) is that client, for every check", async () => {
    for (const entry of [`${A_IP}:51234`, `[${A_IPV6}]:443`, `[${A_IPV6}]`]) {
      const ip = entry.startsWith('[') ? A_IPV6 : A_IP;
      assert.equal(ipOf(await whoami(probe.app, PROXY_IP, { key: a.key, forwardedFor: entry })), ip, entry);
      // The allow-list of another platform, and the firewall of a path no route matches, see it too.
      assertAllowListRefusal(await whoami(probe.app, PROXY_IP, { key: b.key, forwardedFor: entry }));
      const unrouted = await probe.app.inject({
        method: 'GET',
        url: '/nowhere',
        remoteAddress: PROXY_IP,
        headers: { 'x-forwarded-for': entry },
      });
      // Past the firewall: authentication's 401 (unsigned), not the 1020.
      assert.equal(unrouted.statusCode, 401, `${entry}: ${unrouted.body}`);
    }
    // A trusted hop written with its port is skipped like any trusted hop.
    const viaGateway = `${A_IP}:51234, 10.9.0.3:443, [::ffff:172.16.0.1]:8443`;
    assert.equal(ipOf(await whoami(probe.app, PROXY_IP, { key: a.key, forwardedFor: viaGateway })), A_IP);
    assert1020(await whoami(probe.app, PROXY_IP, { key: a.key, forwardedFor: `${NOWHERE_IP}:51234` }));
    // Not an address with a port: as given, so on no list.
    assert1020(await whoami(probe.app, PROXY_IP, { key: a.key, forwardedFor: `${A_IP}:port` }));
  });

  test('a trusted proxy without X-Forwarded-For is itself the source (on no list → 1020)', async () => {
    assert1020(await whoami(probe.app, PROXY_IP, { key: a.key }));
  });

  test('an entry that is no address ("unknown", garbage) leaves the trusted proxy the source, as none does', async () => {
    // Taken as written it was a client of its own ("unknown"), shared by everyone behind such a proxy, with a rate
    // limit block the operator could not lift (`rate_limits/unknown` is no IP).
    const viaProxy = await svc.newPlatform({ allowlist: [`${PROXY_IP}/32`] });
    for (const forwardedFor of ['unknown', `${A_IP}, garbage`, '_hidden'])
      assert.equal(ipOf(await whoami(probe.app, PROXY_IP, { key: viaProxy.key, forwardedFor })), PROXY_IP);
    // As the proxy, on that platform's list only: another platform's key meets its own allow-list.
    assertAllowListRefusal(await whoami(probe.app, PROXY_IP, { key: a.key, forwardedFor: 'unknown' }));
  });

  test('a spoofed X-Forwarded-For from an untrusted peer changes nothing', async () => {
    assert1020(await whoami(probe.app, NOWHERE_IP, { key: a.key, forwardedFor: A_IP }));
    assert1020(await whoami(probe.app, NOWHERE_IP, { key: a.key, forwardedFor: `${PROXY_IP}, ${A_IP}` }));
    assertAllowListRefusal(await whoami(probe.app, B_IP, { key: a.key, forwardedFor: A_IP }));
    assert.equal(ipOf(await whoami(probe.app, A_IP, { key: a.key, forwardedFor: NOWHERE_IP })), A_IP);
  });

  test("a proxy's X-Forwarded-For after a client's 1,000 header lines is still read (none dropped)", async () => {
    // Over a real connection from 127.0.0.1, trusted here: Node's parser is what dropped lines.
    const config = loadConfig({ ...process.env, SVC_TRUST_PROXY: '127.0.0.1/32' });
    const local = await startProbeApp(svc.runtime, {
      config: { ...svc.runtime.config, trustProxy: config.trustProxy },
    });
    try {
      const signed = signedHeaders(b.key, 'GET', '/probe/whoami', undefined, nowS());
      const lines = [
        'GET /probe/whoami HTTP/1.1',
        'host: x',
        ...Object.entries(signed).map(([name, value]) => `${name}: ${value}`),
        // The client's own claim, then lines of its own, then the one the proxy appends last.
        `x-forwarded-for: ${A_IP}`,
        ...Array.from({ length: 1_000 }, (_, i) => `x-pad-${i}: 1`),
        `x-forwarded-for: ${B_IP}`,
      ];
      const answer = await rawHttp(local.url, `${lines.join('\r\n')}\r\n\r\n`);
      assert.match(answer, /^HTTP\/1\.1 200 /, answer);
      const body = JSON.parse(answer.slice(answer.indexOf('\r\n\r\n') + 4)) as { message: { ip: string } };
      assert.equal(body.message.ip, B_IP);
    } finally {
      await local.close();
    }
  });

  test('SVC_TRUST_PROXY entries must be CIDRs', () => {
    assert.throws(() => loadConfig({ SVC_TRUST_PROXY: '10.0.0.0/8,proxy.local' }), /SVC_TRUST_PROXY/);
  });
});

describe('empty allow-lists', () => {
  test('cert: an empty allow-list allows every IP, for that platform', async () => {
    const svc = await startTestService({ clock, env: { SVC_ENV: 'cert' } });
    const probe = await startProbeApp(svc.runtime);
    try {
      const open = await svc.newPlatform({ allowlist: [] });
      const closed = await svc.newPlatform({ allowlist: [`${A_IP}/32`] });
      assert.equal(ipOf(await whoami(probe.app, NOWHERE_IP, { key: open.key })), NOWHERE_IP);
      assertAllowListRefusal(await whoami(probe.app, NOWHERE_IP, { key: closed.key }));
    } finally {
      await probe.close();
      await svc.close();
    }
  });

  test('prod: an empty allow-list, or one of every address, is refused (400), and one already stored opens nothing', async () => {
    const svc = await startTestService({ clock, env: { SVC_ENV: 'prod' } });
    const probe = await startProbeApp(svc.runtime);
    try {
      for (const body of [
        { name: 'empty', ip_allowlist: [] },
        { name: 'none given' },
        { name: 'every v4', ip_allowlist: ['0.0.0.0/0'] },
        { name: 'every v6', ip_allowlist: [`${A_IP}/32`, '::/0'] },
        { name: 'every mapped v4', ip_allowlist: ['::ffff:0.0.0.0/96'] },
        { name: 'every v4 through v6', ip_allowlist: ['::/80'] },
        { name: 'every v4 in halves', ip_allowlist: ['0.0.0.0/1', '128.0.0.0/1'] },
      ]) {
        await assert.rejects(
          svc.admin.post('/platforms', body),
          (error: { status: number; body: { errors: string[] } }) => {
            assert.equal(error.status, 400);
            assert.match(error.body.errors.join(), /^ip_allowlist(\[\d\])?: /);
            return true;
          },
        );
      }
      const a = await svc.newPlatform({ allowlist: [`${A_IP}/32`] });
      await assert.rejects(
        svc.admin.put(`/platforms/${a.platform.platform_code}/ip_allowlist`, { cidrs: [] }),
        (error: { status: number; body: { errors: string[] } }) => {
          assert.equal(error.status, 400);
          assert.match(error.body.errors.join(), /^cidrs: /);
          return true;
        },
      );
      await assert.rejects(
        svc.admin.put(`/platforms/${a.platform.platform_code}/ip_allowlist`, {
          cidrs: [`${A_IP}/32`, '0.0.0.0/0'],
        }),
        (error: { status: number; body: { errors: string[] } }) => {
          assert.equal(error.status, 400);
          assert.deepEqual(error.body.errors, [
            'cidrs[1]: "0.0.0.0/0" allows every IP, which only SVC_ENV=cert permits',
          ]);
          return true;
        },
      );
      // One stored while the service ran in cert opens nothing in prod either, for any platform.
      const b = await svc.newPlatform({ allowlist: [`${A_IP}/32`] });
      await svc.runtime.store.db
        .updateTable('platforms')
        .set({ ip_allowlist: ['0.0.0.0/0', '::/0', `${B_IP}/32`] })
        .where('platform_code', '=', b.platform.platform_code)
        .execute();
      await svc.runtime.store.pool.query(`select pg_notify('svc_cache_invalidation', '{"type":"all"}')`);
      // B_IP let in says the new lists are in force.
      const loaded = Date.now() + 10_000;
      while ((await whoami(probe.app, B_IP, { key: b.key })).statusCode !== 200 && Date.now() < loaded)
        await new Promise((resolve) => setTimeout(resolve, 50));
      assert.equal(ipOf(await whoami(probe.app, B_IP, { key: b.key })), B_IP);
      assert1020(await whoami(probe.app, NOWHERE_IP, { key: b.key }));
      // The documents list every route, the operator's too: in prod, behind the firewall as every public path.
      for (const url of ['/docs/json', '/docs']) {
        assert1020(await probe.app.inject({ method: 'GET', url, remoteAddress: NOWHERE_IP }));
        assert.equal((await probe.app.inject({ method: 'GET', url, remoteAddress: B_IP })).statusCode, 200);
      }
      // A platform left with an empty list (e.g. created while the service ran in cert) allows nothing in prod.
      await svc.runtime.store.db
        .updateTable('platforms')
        .set({ ip_allowlist: [] })
        .where('platform_code', '=', a.platform.platform_code)
        .execute();
      await svc.runtime.store.pool.query(`select pg_notify('svc_cache_invalidation', '{"type":"all"}')`);
      const deadline = Date.now() + 10_000;
      // Until the reload, 200; a request that straddles it may pass the old firewall and meet the new list (403).
      let res = await whoami(probe.app, A_IP, { key: a.key });
      while (res.body !== 'error code: 1020' && Date.now() < deadline) {
        await new Promise((resolve) => setTimeout(resolve, 50));
        res = await whoami(probe.app, A_IP, { key: a.key });
      }
      assert1020(res);
      assert1020(await whoami(probe.app, NOWHERE_IP, { key: a.key }));
    } finally {
      await probe.close();
      await svc.close();
    }
  });
});
