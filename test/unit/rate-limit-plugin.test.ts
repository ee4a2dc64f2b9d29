/**
 * The HTTP side of the rate limit (wire-contract §2.3, §9) on a small Fastify app laid out like
 * src/app.ts: root ops route, a public scope (firewall hook → rate limit → authentication hook →
 * routes) and a sibling admin scope. The real app is exercised in test/http/rate-limit.test.ts.
 */
import assert from 'node:assert/strict';
import { describe, it } from 'node:test';
import Fastify, { type FastifyInstance } from 'fastify';
import { ManualClock } from '../../src/lib/clock.ts';
import { RateLimiterService } from '../../src/domain/ratelimit/rate-limiter.service.ts';
import type { RateLimitDecision, RateLimiter } from '../../src/domain/ratelimit/rate-limiter.ts';
import { rateLimitPlugin } from '../../src/http/plugins/rate-limit.plugin.ts';

const FIREWALLED = '192.0.2.66';

async function buildTestApp(limiter: Pick<RateLimiter, 'decide'>): Promise<FastifyInstance> {
  const app = Fastify({ trustProxy: '127.0.0.1/32' });
  app.get('/healthz', async () => ({ status: 'ok' }));
  await app.register(async (pub) => {
    pub.addHook('onRequest', async (request, reply) => {
      if (request.ip === FIREWALLED) return reply.code(403).type('text/plain').send('error code: 1020');
    });
    await pub.register(rateLimitPlugin, { limiter });
    pub.addHook('onRequest', async (request, reply) => {
      if (request.headers['x-signed'] !== 'yes') return reply.code(401).send({ error: 'bad signature' });
    });
    pub.get('/time', async () => ({ message: { epoch: 1 } }));
    pub.post('/fund/rfq', async () => ({ message: {} }));
  });
  await app.register(
    async (admin) => {
      admin.get('/rate_limits/:ip', async () => ({ message: {} }));
    },
    { prefix: '/admin' },
  );
  return app;
}

function memoryLimiter() {
  const clock = new ManualClock();
  return { clock, limiter: new RateLimiterService({ clock, sweepIntervalMs: false }) };
}

/** `n` requests, in parallel batches, returning the status codes. */
async function send(
  app: FastifyInstance,
  n: number,
  request: { method?: 'GET' | 'POST'; url: string; headers?: Record<string, string> },
): Promise<number[]> {
  const statuses: number[] = [];
  for (let i = 0; i < n; i += 250) {
    const batch = Array.from({ length: Math.min(250, n - i) }, () =>
      app.inject({ method: request.method ?? 'GET', url: request.url, headers: request.headers }),
    );
    statuses.push(...(await Promise.all(batch)).map((r) => r.statusCode));
  }
  return statuses;
}

const count = (statuses: number[], status: number) => statuses.filter((s) => s === status).length;
const signed = { 'x-signed': 'yes' };

describe('rate-limit plugin', () => {
  it('answers the 2,001st request with 429, the wire body and Retry-After in whole seconds', async () => {
    const { clock, limiter } = memoryLimiter();
    const app = await buildTestApp(limiter);
    // spec part 8: counted across all endpoints together.
    assert.equal(count(await send(app, 1000, { url: '/time', headers: signed }), 200), 1000);
    assert.equal(
      count(await send(app, 1000, { method: 'POST', url: '/fund/rfq', headers: signed }), 200),
      1000,
    );
    const refused = await app.inject({ url: '/time', headers: signed });
    assert.equal(refused.statusCode, 429);
    assert.equal(refused.body, '{"error":"Too Many Requests"}');
    assert.match(String(refused.headers['content-type']), /^application\/json/);
    assert.equal(refused.headers['retry-after'], '10');

    clock.advance(2_500);
    assert.equal((await app.inject({ url: '/time', headers: signed })).headers['retry-after'], '8');
    clock.advance(7_400); // 100 ms left: still at least 1
    assert.equal((await app.inject({ url: '/time', headers: signed })).headers['retry-after'], '1');
    clock.advance(1_100);
    assert.equal((await app.inject({ url: '/time', headers: signed })).statusCode, 200);
    await app.close();
  });

  it('runs after the firewall and before authentication: 1020s are not counted, 401s are', async () => {
    const { limiter } = memoryLimiter();
    const app = await buildTestApp(limiter);
    const firewalled = await send(app, 2500, { url: '/time', headers: { 'x-forwarded-for': FIREWALLED } });
    assert.equal(count(firewalled, 403), 2500, 'the firewall answers first');
    assert.equal((await limiter.inspect(FIREWALLED)).count, 0);

    // wire-contract §9: a flood of badly signed requests is limited like any other.
    const unsigned = await send(app, 2001, { url: '/time' });
    assert.equal(count(unsigned, 401), 2000);
    assert.equal(count(unsigned, 429), 1);
    assert.equal((await app.inject({ url: '/time', headers: signed })).statusCode, 429);
    await app.close();
  });

  it('does not count or limit routes outside the public scope (operator API, /healthz)', async () => {
    const { limiter } = memoryLimiter();
    const app = await buildTestApp(limiter);
    assert.equal(count(await send(app, 2500, { url: '/admin/rate_limits/127.0.0.1' }), 200), 2500);
    assert.equal(count(await send(app, 2500, { url: '/healthz' }), 200), 2500);
    assert.equal((await limiter.inspect('127.0.0.1')).count, 0);
    await send(app, 2001, { url: '/time', headers: signed });
    assert.equal((await app.inject({ url: '/admin/rate_limits/127.0.0.1' })).statusCode, 200);
    assert.equal((await app.inject({ url: '/healthz' })).statusCode, 200);
    await app.close();
  });

  it('limits by the source IP that trustProxy resolves (wire-contract §2.4)', async () => {
    const { limiter } = memoryLimiter();
    const app = await buildTestApp(limiter);
    const a = { ...signed, 'x-forwarded-for': '198.51.100.1' };
    const b = { ...signed, 'x-forwarded-for': '198.51.100.2' };
    assert.equal(count(await send(app, 2001, { url: '/time', headers: a }), 429), 1);
    assert.equal((await app.inject({ url: '/time', headers: a })).statusCode, 429);
    assert.equal((await app.inject({ url: '/time', headers: b })).statusCode, 200);
    assert.equal((await app.inject({ url: '/time', headers: signed })).statusCode, 200, 'the proxy itself');
    await app.close();
  });

  it('counts one address once, however it is written (IPv4-mapped IPv6, IPv6 case and zeros)', async () => {
    const { limiter } = memoryLimiter();
    const app = await buildTestApp(limiter);
    await send(app, 3, { url: '/time', headers: { ...signed, 'x-forwarded-for': '::ffff:198.51.100.9' } });
    await send(app, 2, { url: '/time', headers: { ...signed, 'x-forwarded-for': '198.51.100.9' } });
    assert.equal((await limiter.inspect('198.51.100.9')).count, 5);
    await send(app, 2, { url: '/time', headers: { ...signed, 'x-forwarded-for': '2001:DB8:0::7' } });
    await send(app, 2, { url: '/time', headers: { ...signed, 'x-forwarded-for': '2001:db8::7' } });
    assert.equal((await limiter.inspect('2001:0db8:0000::7')).count, 4);
    await app.close();
  });

  it('SVC_RATE_LIMIT_IPV6_PREFIX=64 counts an IPv6 source as its /64: the addresses of one network share a budget, the next network has its own', async () => {
    const clock = new ManualClock();
    const limiter = new RateLimiterService({
      clock,
      sweepIntervalMs: false,
      policy: { limit: 3, ipv6PrefixLength: 64 },
    });
    const app = await buildTestApp(limiter);
    const from = (address: string) =>
      app.inject({ url: '/time', headers: { ...signed, 'x-forwarded-for': address } });
    for (const address of ['2001:db8:1:2::a', '2001:db8:1:2:ffff::b', '2001:DB8:1:2:0:0:0:c'])
      assert.equal((await from(address)).statusCode, 200);
    assert.equal(
      (await from('2001:db8:1:2:1234:5678:9abc:def0')).statusCode,
      429,
      'a fresh address of the /64',
    );
    assert.equal((await from('2001:db8:1:3::a')).statusCode, 200, 'the next /64');
    const state = await limiter.inspect('2001:db8:1:2::99');
    assert.equal(state.ip, '2001:db8:1:2::/64');
    assert.equal(state.blocked, true);
    assert.equal(
      (await limiter.unblock('2001:db8:1:2:aaaa::1')).blocked,
      false,
      'any address of it unblocks it',
    );
    assert.equal((await from('2001:db8:1:2::a')).statusCode, 200);
    await app.close();
  });

  it('counts every IPv6 address on its own by default; at /64 too where a /64 is no one host', async () => {
    const clock = new ManualClock();
    const perAddress = new RateLimiterService({ clock, sweepIntervalMs: false, policy: { limit: 1 } });
    assert.equal((await perAddress.check('2001:db8:1:2::a')).allowed, true);
    assert.equal((await perAddress.check('2001:db8:1:2::b')).allowed, true);
    assert.equal((await perAddress.check('2001:db8:1:2::a')).allowed, false);
    assert.equal((await perAddress.inspect('2001:db8:1:2::a')).ip, '2001:db8:1:2::a');
    const perNetwork = new RateLimiterService({
      clock,
      sweepIntervalMs: false,
      policy: { limit: 1, ipv6PrefixLength: 64 },
    });
    // Link-local (with or without a zone), translators' prefixes (an IPv4 client each) and ::/96.
    for (const [first, second] of [
      ['fe80::1%eth0', 'fe80::2%eth0'],
      ['fe80::a', 'fe80::b'],
      ['fe80:0:0:1::1', 'fe80:0:0:1::2'],
      ['64:ff9b::1.2.3.4', '64:ff9b::5.6.7.8'],
      ['64:ff9b:1::102:304', '64:ff9b:1::506:708'],
      ['::ffff:0:1.2.3.4', '::ffff:0:5.6.7.8'],
      ['::1', '::1.2.3.4'],
    ]) {
      assert.equal((await perNetwork.check(first!)).allowed, true, first);
      assert.equal((await perNetwork.check(second!)).allowed, true, `${second} after ${first}`);
    }
    assert.equal((await perNetwork.inspect('fe80::1%eth0')).ip, 'fe80::1%eth0');
    assert.equal((await perNetwork.inspect('64:ff9b::1.2.3.4')).ip, '64:ff9b::102:304');
    // A zone on another address does not take it out of its network.
    assert.equal((await perNetwork.check('2001:db8:9:9::1%eth0')).allowed, true);
    assert.equal((await perNetwork.check('2001:db8:9:9::2%eth0')).allowed, false);
    assert.equal((await perNetwork.inspect('2001:db8:9:9::5%eth0')).ip, '2001:db8:9:9::/64%eth0');
    for (const ipv6PrefixLength of [31, 129, 64.5])
      assert.throws(
        () => new RateLimiterService({ clock, sweepIntervalMs: false, policy: { ipv6PrefixLength } }),
        /rate limit ipv6PrefixLength must be/,
      );
  });

  it('a link-local IPv6 peer with its zone ("fe80::1%eth0") is counted, canonically, with its zone; never a 500', async () => {
    const { limiter } = memoryLimiter();
    const app = await buildTestApp(limiter);
    const from = (remoteAddress: string) =>
      app.inject({ url: '/time', headers: { ...signed, 'x-forwarded-for': remoteAddress } });
    assert.equal((await from('FE80:0::1%eth0')).statusCode, 200);
    assert.equal((await from('fe80::1%eth0')).statusCode, 200);
    assert.equal((await from('fe80::1%eth1')).statusCode, 200);
    assert.equal((await limiter.inspect('fe80::1%eth0')).count, 2);
    assert.equal((await limiter.inspect('fe80::1%eth1')).count, 1, 'another interface, another peer');
    assert.equal((await limiter.unblock('fe80::1%eth0')).count, 0, 'the operator view takes it too');
    await app.close();
  });

  it('waits for a limiter that answers asynchronously (the Redis path)', async () => {
    let calls = 0;
    const limiter = {
      decide: (_ip: string, done: (decision: RateLimitDecision) => void): void => {
        calls++;
        const decision: RateLimitDecision =
          calls <= 2
            ? { allowed: true, retryAfterMs: 0, blockStarted: false }
            : { allowed: false, retryAfterMs: 4_200, blockStarted: calls === 3 };
        setImmediate(() => done(decision));
      },
    };
    const app = await buildTestApp(limiter);
    assert.deepEqual(await send(app, 2, { url: '/time', headers: signed }), [200, 200]);
    const refused = await app.inject({ url: '/time', headers: signed });
    assert.equal(refused.statusCode, 429);
    assert.equal(refused.headers['retry-after'], '5');
    await app.close();
  });
});
