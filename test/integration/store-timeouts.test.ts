import assert from 'node:assert/strict';
import { randomBytes } from 'node:crypto';
import { after, before, test } from 'node:test';
import { sql } from 'kysely';
import type { Runtime } from '../../src/main/runtime.ts';
import { SvcClient } from '../../src/sdk/client.ts';
import { startInstance } from '../helpers/instance.ts';
import { eventually } from '../helpers/service-process.ts';
import { startTcpProxy } from '../helpers/tcp-proxy.ts';
import {
  startTestService,
  TEST_ADMIN_TOKEN,
  type PlatformFixture,
  type TestService,
} from '../helpers/test-service.ts';

/**
 * DESIGN §6, README "Deployment": a PostgreSQL that stops answering without closing its connections (a
 * partition, a failover, a hung host) costs an instance 503s, not hangs. /readyz says so within its own short
 * timeout (2 s), the API within the store's bounds (5 s to connect, 30 s for a statement), and shutdown
 * finishes. The bounds are the shipped defaults, so the deadlines below are generous multiples of them.
 */
let svc: TestService;
let fixture: PlatformFixture;
before(async () => {
  svc = await startTestService();
  fixture = await svc.newPlatform();
});
after(() => svc?.close());

/** An instance of the service whose database connections go to `databaseUrl` (a proxy's, another role's). */
async function instanceAt(databaseUrl: string) {
  const instance = await startInstance(svc, { databaseUrl });
  const api = new SvcClient({
    baseUrl: instance.url!,
    apiKey: fixture.key.api_key,
    apiSecret: fixture.key.api_secret,
    passphrase: fixture.key.passphrase,
    retry: false,
    // An answer that does not come within this counts as a hang (SvcConnectionError).
    timeoutMs: 60_000,
  });
  const fetchStatus = async (path: string, headers: Record<string, string> = {}) => {
    const res = await fetch(instance.url + path, { headers, signal: AbortSignal.timeout(60_000) });
    await res.arrayBuffer();
    return { status: res.status, retry: res.headers.get('svc-allow-retry') };
  };
  return {
    instance,
    readyz: () => fetchStatus('/readyz'),
    healthz: () => fetchStatus('/healthz'),
    operator: () => fetchStatus('/admin/platforms', { authorization: `Bearer ${TEST_ADMIN_TOKEN}` }),
    public: async () => {
      const res = await api.send('GET', '/trades');
      return { status: res.status, retry: res.headers.get('svc-allow-retry') };
    },
  };
}

/** `work`'s result and how long it took. */
async function timed<T>(work: () => Promise<T>): Promise<{ value: T; ms: number }> {
  const start = Date.now();
  const value = await work();
  return { value, ms: Date.now() - start };
}

test('a silent database: /readyz 503 promptly, API calls 503 instead of hanging, all answer again after', async () => {
  const proxy = await startTcpProxy(svc.database.url);
  let instance: Runtime | undefined;
  try {
    const calls = await instanceAt(proxy.url);
    instance = calls.instance;
    assert.equal((await calls.readyz()).status, 200);
    // Several connections in the pool, idle when the database goes silent.
    for (const res of await Promise.all([calls.public(), calls.operator(), calls.public(), calls.operator()]))
      assert.equal(res.status, 200);

    proxy.freeze();
    // /readyz first: it gets one of the silent connections, and must not wait for the store's 30 s bound.
    const readyz = await timed(calls.readyz);
    assert.equal(readyz.value.status, 503);
    assert.ok(
      readyz.ms < 15_000,
      `/readyz answered after ${readyz.ms} ms; its database check gives up at 2 s`,
    );
    // Then the API, all at once: each call waits for a bound of its own (a statement on a silent connection,
    // or a new connection that is never answered), not for the others.
    const [publicCall, operatorCall, healthz] = await Promise.all([
      calls.public(),
      calls.operator(),
      calls.healthz(),
    ]);
    for (const call of [publicCall, operatorCall]) assert.deepEqual(call, { status: 503, retry: 'true' });
    // Liveness is not readiness: the process itself is fine.
    assert.equal(healthz.status, 200);

    // Connections made afresh answer; those left silent are dropped as statements on them time out.
    proxy.thaw();
    await eventually(
      async () => {
        const statuses = [await calls.readyz(), await calls.public(), await calls.operator()];
        return statuses.every((s) => s.status === 200) ? true : undefined;
      },
      120_000,
      '/readyz, the public and the operator API answering 200 again',
    );
  } finally {
    await proxy.close(); // first: it cuts connections that would hold a failed test's close() up
    await instance?.close();
  }
});

test('a database that accepts a session and answers nothing more: a retryable 503, within the connect bounds', async () => {
  // The new connection's session settings get no answer. That failed the connection with an error the error
  // handler did not take for a lost connection: a 500 without svc-allow-retry (review).
  const proxy = await startTcpProxy(svc.database.url);
  let instance: Runtime | undefined;
  try {
    const calls = await instanceAt(proxy.url);
    instance = calls.instance;
    assert.equal((await calls.operator()).status, 200);
    // The pool's connections are cut; the next request needs a new one.
    await proxy.down();
    proxy.muteAfterStartup();
    await proxy.up();
    const operator = await timed(calls.operator);
    assert.deepEqual(operator.value, { status: 503, retry: 'true' });
    assert.ok(operator.ms < 20_000, `answered after ${operator.ms} ms`);
  } finally {
    await proxy.close();
    await instance?.close();
  }
});

test('PostgreSQL refusing new connections (here a role that may not log in): a retryable 503, then served again', async () => {
  // Probe: PostgreSQL's refusal of a new connection (55000 "not currently accepting connections", 28000 "not
  // permitted to log in") answered every request 500, which clients do not retry, with an error line each; a
  // refusal for want of a slot (53300) was already a 503. The role is this instance's alone, so that its refusal
  // leaves the test's own service alone.
  const role = `svc_refused_${randomBytes(4).toString('hex')}`;
  const { db } = svc.runtime.store;
  // With a password, for a database that asks for one (the embedded default); trust ignores it.
  const password = randomBytes(12).toString('hex');
  await sql`create role ${sql.id(role)} login superuser password ${sql.lit(password)}`.execute(db);
  const cutSessions = () =>
    sql`select pg_terminate_backend(pid) from pg_stat_activity where usename = ${role}`.execute(db);
  let instance: Runtime | undefined;
  try {
    const url = new URL(svc.database.url);
    url.username = role;
    url.password = password;
    const calls = await instanceAt(url.toString());
    instance = calls.instance;
    for (const res of await Promise.all([calls.public(), calls.operator()])) assert.equal(res.status, 200);

    await sql`alter role ${sql.id(role)} nologin`.execute(db);
    await cutSessions();
    for (const res of await Promise.all([calls.public(), calls.operator(), calls.public()]))
      assert.deepEqual(res, { status: 503, retry: 'true' });
    assert.equal((await calls.readyz()).status, 503);

    await sql`alter role ${sql.id(role)} login`.execute(db);
    await eventually(
      async () => {
        const statuses = [await calls.readyz(), await calls.public(), await calls.operator()];
        return statuses.every((s) => s.status === 200) ? true : undefined;
      },
      60_000,
      '/readyz, the public and the operator API answering 200 again',
    );
  } finally {
    await instance?.close();
    await cutSessions();
    await sql`drop role if exists ${sql.id(role)}`.execute(db);
  }
});

test('shutdown finishes while the database is silent', async () => {
  const proxy = await startTcpProxy(svc.database.url);
  let instance: Runtime | undefined;
  let closing: Promise<unknown> | undefined;
  try {
    const calls = await instanceAt(proxy.url);
    instance = calls.instance;
    assert.equal((await calls.public()).status, 200);
    proxy.freeze();
    let closed = false;
    closing = instance.close().then(() => (closed = true));
    await eventually(async () => (closed ? true : undefined), 60_000, 'close() finished');
  } finally {
    await proxy.close();
    await (closing ?? instance?.close());
  }
});
