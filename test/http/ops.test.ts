import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { after, before, describe, test } from 'node:test';
import Fastify from 'fastify';
import { sql } from 'kysely';
import { Registry } from 'prom-client';
import { opsRoutes, type ReadinessCheck } from '../../src/http/routes/ops.routes.ts';
import { enqueueJob } from '../../src/jobs/enqueue.ts';
import { ManualClock } from '../../src/lib/clock.ts';
import type { Runtime } from '../../src/main/runtime.ts';
import { startInstance } from '../helpers/instance.ts';
import { rawRequest } from '../helpers/probe-app.ts';
import { eventually } from '../helpers/service-process.ts';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.ts';
import { startTestService, TEST_ADMIN_TOKEN, type TestService } from '../helpers/test-service.ts';
import { assertVendorSchema } from '../helpers/vendor-schema.ts';
import { capturedLogger } from '../helpers/captured-log.ts';

/** Issue 2 point 8: /time, /healthz, /readyz, /metrics, /docs and structured logs with the request id. */
const clock = new ManualClock(Date.UTC(2026, 5, 1, 12, 0, 0, 123));
const { logger, lines: logLines } = capturedLogger('info');

let svc: TestService;
before(async () => {
  svc = await startTestService({ clock, logger });
  await svc.newPlatform(); // puts loopback on an allow-list, so the firewall lets the tests in
});
after(() => svc?.close());

const adminHeaders = { authorization: `Bearer ${TEST_ADMIN_TOKEN}` };

describe('GET /time', () => {
  test('unauthenticated, vendor shape, epoch milliseconds from the service clock', async () => {
    const res = await rawRequest(svc.url, 'GET', '/time');
    assert.equal(res.status, 200);
    const body = res.json as { message: { epoch: number; epoch_units: string; iso_8601: string } };
    assert.deepEqual(body, {
      message: { epoch: clock.now(), epoch_units: 'milliseconds', iso_8601: '2026-06-01T12:00:00.123Z' },
    });
    assertVendorSchema(body.message, 'GetTimeResponse');
  });
});

describe('health', () => {
  test('/healthz answers while the process is up', async () => {
    const res = await rawRequest(svc.url, 'GET', '/healthz');
    assert.equal(res.status, 200);
    assert.deepEqual(res.json, { status: 'ok' });
  });

  test('/readyz is 200 with the database and 503 without it', async () => {
    const ready = await rawRequest(svc.url, 'GET', '/readyz');
    assert.equal(ready.status, 200);
    assert.deepEqual(ready.json, { status: 'ready', checks: { database: true } });

    let proxy: TcpProxy | undefined;
    let instance: Runtime | undefined;
    try {
      proxy = await startTcpProxy(svc.database.url);
      instance = await startInstance(svc, { databaseUrl: proxy.url });
      assert.equal((await rawRequest(instance.url!, 'GET', '/readyz')).status, 200);
      await proxy.down();
      const down = await rawRequest(instance.url!, 'GET', '/readyz');
      assert.equal(down.status, 503);
      assert.deepEqual(down.json, { status: 'not ready', checks: { database: false } });
      // Liveness is not readiness: the process itself is fine.
      assert.equal((await rawRequest(instance.url!, 'GET', '/healthz')).status, 200);
      await proxy.up();
      await eventually(
        async () => ((await rawRequest(instance!.url!, 'GET', '/readyz')).status === 200 ? true : undefined),
        10_000,
        'ready again',
      );
    } finally {
      await instance?.close();
      await proxy?.close();
    }
  });
});

describe('GET /readyz with every pool connection busy', () => {
  test("is ready: the database answers on the probe's own connection, outside the pool", async () => {
    // A contended row or a burst of slow statements can hold every pooled connection of every instance at
    // once; a probe queued behind them failed, and a load balancer pulled every instance (probe).
    const instance = await startInstance(svc, { env: { SVC_DB_POOL_MAX: '2' } });
    const held: Array<{ release(): void }> = [];
    try {
      assert.equal((await rawRequest(instance.url!, 'GET', '/readyz')).status, 200);
      held.push(await instance.store.pool.connect(), await instance.store.pool.connect());
      assert.equal(instance.store.pool.totalCount, 2);
      assert.equal(instance.store.pool.idleCount, 0);
      const busy = await rawRequest(instance.url!, 'GET', '/readyz');
      assert.deepEqual([busy.status, busy.json], [200, { status: 'ready', checks: { database: true } }]);
    } finally {
      for (const client of held) client.release();
      await instance.close();
    }
  });
});

/** Writes `request` on a connection of its own and resolves with all that came back once the server closed it. */
function rawSocketExchange(url: string, request: string): Promise<string> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect({ host: hostname, port: Number(port) }, () => socket.write(request));
    let received = '';
    socket.on('data', (chunk) => (received += String(chunk)));
    socket.on('close', () => resolve(received));
    socket.on('error', reject);
  });
}

describe('GET /metrics', () => {
  const sample = (text: string, name: string, labels: string) =>
    Number(new RegExp(`^${name}\\{${labels}\\} (\\d+(?:\\.\\d+)?)$`, 'm').exec(text)?.[1] ?? 0);

  test('Prometheus text with the request counter, labelled by route pattern', async () => {
    const before = await rawRequest(svc.url, 'GET', '/metrics');
    assert.equal(before.status, 200);
    assert.match(String(before.headers['content-type']), /^text\/plain; version=0\.0\.4/);
    const timeLabels = 'method="GET",route="/time",status="200"';
    const n0 = sample(before.text, 'svc_http_requests_total', timeLabels);

    await rawRequest(svc.url, 'GET', '/time');
    await rawRequest(svc.url, 'GET', '/time');
    await rawRequest(svc.url, 'GET', '/admin/platforms/QQQ999', { headers: adminHeaders });
    await rawRequest(svc.url, 'GET', '/no/such/route/abc123');

    const after = (await rawRequest(svc.url, 'GET', '/metrics')).text;
    assert.equal(sample(after, 'svc_http_requests_total', timeLabels), n0 + 2);
    assert.ok(
      sample(after, 'svc_http_requests_total', 'method="GET",route="/admin/platforms/:code",status="404"') >=
        1,
    );
    assert.match(after, /^# TYPE svc_http_requests_total counter$/m);
    assert.match(after, /^# TYPE svc_http_request_duration_seconds histogram$/m);
    // Buckets up to the service's own 5 s and 30 s bounds, so requests held by them are told apart.
    for (const le of ['5', '10', '30'])
      assert.match(
        after,
        new RegExp(
          `^svc_http_request_duration_seconds_bucket\\{le="${le}",method="GET",route="/time"\\} \\d`,
          'm',
        ),
      );
    assert.match(after, /^process_cpu_seconds_total /m);
    // Raw paths never become labels (bounded cardinality).
    assert.equal(after.includes('QQQ999'), false);
    assert.equal(after.includes('abc123'), false);

    // A URL the router refuses before routing (bad percent-encoding) is counted and logged like any other;
    // unsigned, it is refused as unauthenticated before its URL is looked at.
    const unmatched = (status: number, text: string) =>
      sample(text, 'svc_http_requests_total', `method="GET",route="unmatched",status="${status}"`);
    const refused = await rawRequest(svc.url, 'GET', '/%zz', { headers: { 'x-request-id': 'log-bad-url' } });
    assert.equal(refused.status, 401);
    const final = (await rawRequest(svc.url, 'GET', '/metrics')).text;
    assert.equal(unmatched(refused.status, final), unmatched(refused.status, after) + 1);
    const line = logLines
      .map((l) => JSON.parse(l) as Record<string, unknown>)
      .find((l) => l.reqId === 'log-bad-url');
    assert.equal(line?.msg, 'request completed');
    assert.equal(line?.url, '/%zz');
    assert.equal(line?.statusCode, refused.status);

    // One Node's HTTP parser refuses never reaches the router: counted too, its method unread (probe: a flood of
    // malformed requests, which can start a rate-limit block, was in no dashboard).
    const unparsed = (status: number, text: string) =>
      sample(text, 'svc_http_requests_total', `method="unparsed",route="unmatched",status="${status}"`);
    const malformed = await rawSocketExchange(svc.url, 'GET /time HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n');
    assert.match(malformed, /^HTTP\/1\.1 400 /);
    const overflow = await rawSocketExchange(
      svc.url,
      `GET /time HTTP/1.1\r\nHost: x\r\nx-big: ${'a'.repeat(20 * 1024)}\r\n\r\n`,
    );
    assert.match(overflow, /^HTTP\/1\.1 431 /);
    const counted = (await rawRequest(svc.url, 'GET', '/metrics')).text;
    assert.equal(unparsed(400, counted), unparsed(400, final) + 1);
    assert.equal(unparsed(431, counted), unparsed(431, final) + 1);
  });

  test('the job queue by task and state: ready, scheduled, running, failed (this instance runs no worker)', async () => {
    const db = svc.runtime.store.db;
    const task = 'ops.metrics_probe';
    await enqueueJob(db, task, {});
    await enqueueJob(db, task, {}, { runAt: new Date(Date.now() + 3_600_000) });
    await enqueueJob(db, task, {}, { jobKey: 'ops-metrics-running' });
    await enqueueJob(db, task, {}, { jobKey: 'ops-metrics-failed', maxAttempts: 1 });
    await sql`update graphile_worker._private_jobs set locked_at = now(), locked_by = 'ops-test'
      where key = 'ops-metrics-running'`.execute(db);
    await sql`update graphile_worker._private_jobs set attempts = 1
      where key = 'ops-metrics-failed'`.execute(db);
    // Scrapes a second apart share one read: wait for one that has these jobs.
    const text = await eventually(
      async () => {
        const body = (await rawRequest(svc.url, 'GET', '/metrics')).text;
        return body.includes(`task="${task}"`) ? body : undefined;
      },
      10_000,
      'the jobs in /metrics',
    );
    assert.match(text, /^# TYPE svc_jobs gauge$/m);
    for (const state of ['ready', 'scheduled', 'running', 'failed'])
      assert.equal(sample(text, 'svc_jobs', `task="${task}",state="${state}"`), 1, state);
    // Every task of the task list is there in every state, jobs or not: an alert on a series that vanished
    // when its task's last job ran would never fire.
    for (const listed of ['trades.settle', 'funding.expire_session'])
      for (const state of ['ready', 'scheduled', 'running', 'failed'])
        assert.match(text, new RegExp(`^svc_jobs\\{task="${listed}",state="${state}"\\} \\d`, 'm'));
    assert.match(text, /^svc_jobs_stats_age_seconds \d/m);
    await sql`delete from graphile_worker._private_jobs where task_id =
      (select id from graphile_worker._private_tasks where identifier = ${task})`.execute(db);
  });

  test('every webhook attempt outcome has its series at zero before the first attempt (this instance delivers none)', async () => {
    // Probe: the series appeared at their first attempt, which increase() and rate() then missed: an alert on the
    // first `gone` never fired, and a process that does not deliver showed none, where the README says zero.
    const text = (await rawRequest(svc.url, 'GET', '/metrics')).text;
    for (const outcome of ['delivered', 'failed', 'gone', 'aborted']) {
      assert.match(text, new RegExp(`^svc_webhook_attempts_total\\{outcome="${outcome}"\\} 0$`, 'm'));
      assert.match(
        text,
        new RegExp(`^svc_webhook_attempt_duration_seconds_count\\{outcome="${outcome}"\\} 0$`, 'm'),
      );
    }
  });
});

describe('GET /docs', () => {
  test('serves a docs page and an OpenAPI 3.1 document generated from the route schemas', async () => {
    const page = await rawRequest(svc.url, 'GET', '/docs');
    assert.equal(page.status, 200);
    assert.match(String(page.headers['content-type']), /text\/html/);

    const res = await rawRequest(svc.url, 'GET', '/docs/json');
    assert.equal(res.status, 200);
    const doc = res.json as {
      openapi: string;
      paths: Record<string, Record<string, { requestBody?: unknown; responses?: Record<string, unknown> }>>;
      components: { securitySchemes: Record<string, unknown> };
    };
    assert.equal(doc.openapi, '3.1.0');
    // Public and operator paths, in OpenAPI path syntax.
    for (const p of [
      '/time',
      '/admin/platforms',
      '/admin/platforms/{code}/api_keys',
      '/admin/api_keys/{api_key}',
    ]) {
      assert.ok(doc.paths[p], `${p} missing from ${Object.keys(doc.paths).join(', ')}`);
    }
    // Generated from the schemas the routes validate with.
    const create = doc.paths['/admin/platforms']!.post as {
      requestBody: {
        content: {
          'application/json': { schema: { properties: Record<string, unknown>; required: string[] } };
        };
      };
      responses: Record<string, unknown>;
    };
    const schema = create.requestBody.content['application/json'].schema;
    assert.deepEqual(Object.keys(schema.properties).sort(), [
      'deposit_fee_bps',
      'ip_allowlist',
      'name',
      'quote_expiry_ms',
      'quote_expiry_requests',
    ]);
    assert.deepEqual(schema.required, ['name']);
    assert.ok(create.responses['201'] && create.responses['400'] && create.responses['401']);
    assert.ok(doc.components.securitySchemes.apiSigned && doc.components.securitySchemes.adminToken);
    // Every operator operation takes the bearer token, not the public API's signed headers (the document's
    // default): /docs "Try it out" and generated clients sent X-SCX-* headers and got 401.
    const operations = (prefix: string) =>
      Object.entries(doc.paths)
        .filter(([p]) => p.startsWith(prefix))
        .flatMap(([p, methods]) => Object.entries(methods).map(([m, op]) => ({ at: `${m} ${p}`, op })));
    const admin = operations('/admin/');
    assert.ok(admin.length > 10, `${admin.length} operator operations`);
    for (const { at, op } of admin) {
      assert.deepEqual((op as { security?: unknown }).security, [{ adminToken: [] }], at);
    }
    const accounts = doc.paths['/accounts']!.get as { security?: unknown };
    assert.equal(accounts.security, undefined, 'public routes keep the default (signed headers)');
    // Each public route documents the errors it can answer: 409 only where a repeat is refused (every route listed
    // 409: review), 413 on each, as each reads a body (a GET's is signed); 502 and 504 on each (probe: a generated
    // client had no type for the answer that says a write's outcome is unknown).
    const publicOps = operations('/').filter(({ at }) => !at.includes(' /admin/'));
    const documenting = (status: string) =>
      publicOps
        .filter(({ op }) => (op as { responses?: Record<string, unknown> }).responses?.[status])
        .map(({ at }) => at)
        .sort();
    assert.deepEqual(documenting('409'), [
      'delete /accounts/{zrn}/tenants/{tenant}',
      'post /accounts',
      'post /accounts/{zrn}/tenants',
      'post /participants/customers/new',
    ]);
    const authenticated = publicOps
      .filter(({ at }) => at !== 'get /time' && at !== 'get /.well-known/jwks.json')
      .map(({ at }) => at)
      .sort();
    assert.ok(authenticated.length >= 20, `${authenticated.length} authenticated operations`);
    for (const status of ['413', '502', '504']) assert.deepEqual(documenting(status), authenticated, status);
    // The firewall's 403 is text, on every public route (probe: a generated client could not read the first answer
    // a new deployment gives); the allow-list's and the owner's are JSON.
    const contentOf403 = (op: unknown) =>
      Object.keys(
        (op as { responses: Record<string, { content?: Record<string, unknown> }> }).responses['403']
          ?.content ?? {},
      ).sort();
    for (const { at, op } of publicOps) {
      const expected = authenticated.includes(at) ? ['application/json', 'text/plain'] : ['text/plain'];
      assert.deepEqual(contentOf403(op), expected, at);
    }
    // The unauthenticated routes are rate-limited too, and check their target as every route does.
    for (const p of ['/time', '/.well-known/jwks.json']) {
      const get = doc.paths[p]!.get as { security?: unknown; responses: Record<string, unknown> };
      assert.deepEqual(get.security, [], p);
      assert.ok(get.responses['429'], `${p} documents its 429`);
      assert.ok(get.responses['400'], `${p} documents its 400`);
    }
    // An operator route that reads a body documents the 413; one that reads none does not.
    for (const { at, op } of admin) {
      const has413 = (op as { responses: Record<string, unknown> }).responses['413'] !== undefined;
      assert.equal(has413, !at.startsWith('get '), at);
    }
    // Operational endpoints are not part of the API document.
    assert.equal(doc.paths['/healthz'], undefined);
    assert.equal(doc.paths['/metrics'], undefined);
  });

  test('names every operation once and says what it does: generated clients name their methods by it', async () => {
    // None had an operationId, so openapi-generator made names of the path and method
    // (`adminPlatformsCodeApiKeysPost`), and 17 operator operations showed no summary in /docs.
    const doc = (await rawRequest(svc.url, 'GET', '/docs/json')).json as {
      paths: Record<string, Record<string, { operationId?: string; summary?: string }>>;
    };
    const operations = Object.entries(doc.paths).flatMap(([p, methods]) =>
      Object.entries(methods).map(([m, op]) => ({ at: `${m} ${p}`, ...op })),
    );
    assert.ok(operations.length >= 55, `${operations.length} operations`);
    const ids = new Map<string, string>();
    for (const { at, operationId, summary } of operations) {
      assert.match(operationId ?? '', /^[a-z][A-Za-z]+$/, `${at}: operationId`);
      assert.equal(
        ids.get(operationId!),
        undefined,
        `${at} and ${ids.get(operationId!)} share ${operationId}`,
      );
      ids.set(operationId!, at);
      assert.ok((summary ?? '').length > 5, `${at}: summary`);
      // The operator's are told apart from the public ones of the same name (GET /trades, GET /admin/trades).
      assert.equal(operationId!.startsWith('admin'), at.includes(' /admin/'), `${at}: ${operationId}`);
    }
    assert.equal(ids.get('executeLiquidityQuote'), 'post /liquidity/execute');
    assert.equal(ids.get('adminRevokeApiKey'), 'delete /admin/api_keys/{api_key}');
  });
});

describe('structured logs', () => {
  test('JSON lines carrying the request id, the caller’s when it sent one', async () => {
    await rawRequest(svc.url, 'GET', '/time', { headers: { 'x-request-id': 'log-trace-1' } });
    const lines = logLines.map((line) => JSON.parse(line) as Record<string, unknown>);
    const mine = lines.filter((l) => l.reqId === 'log-trace-1');
    assert.ok(mine.length >= 1, 'the request was logged with its id');
    // One line per request, on completion.
    assert.equal(mine.length, 1, JSON.stringify(mine));
    const completed = mine[0]!;
    assert.equal(completed.msg, 'request completed');
    assert.equal(completed.statusCode, 200);
    assert.equal(completed.method, 'GET');
    assert.equal(completed.url, '/time');
    assert.equal(typeof completed.responseTime, 'number');
    assert.equal(typeof completed.time, 'number');
    assert.equal(typeof completed.level, 'number');

    await rawRequest(svc.url, 'GET', '/time');
    const generated = logLines
      .map((line) => JSON.parse(line) as Record<string, unknown>)
      .filter((l) => typeof l.reqId === 'string' && /^[0-9a-f-]{36}$/.test(l.reqId));
    assert.ok(generated.length >= 1, 'a generated request id is logged too');

    // Probes and scrapes are logged at debug only, not at info with every request.
    for (const path of ['/healthz', '/readyz', '/metrics'])
      await rawRequest(svc.url, 'GET', path, { headers: { 'x-request-id': `log-probe${path}` } });
    await rawRequest(svc.url, 'GET', '/time', { headers: { 'x-request-id': 'log-after-probes' } });
    const ids = logLines.map((line) => (JSON.parse(line) as { reqId?: string }).reqId);
    assert.ok(ids.includes('log-after-probes'));
    assert.deepEqual(
      ids.filter((id) => id?.startsWith('log-probe')),
      [],
    );
  });

  test('an id written in UTF-8 is logged as written, and bytes that are no UTF-8 as they came', async () => {
    // Node reads a header's bytes one a character: this string is sent as the id's UTF-8 bytes.
    const asSent = (text: string) => Buffer.from(text, 'utf8').toString('latin1');
    await rawRequest(svc.url, 'GET', '/time', { headers: { 'x-request-id': asSent('log-é-日本-✓') } });
    await rawRequest(svc.url, 'GET', '/time', { headers: { 'x-request-id': 'log-latin1-\xe9' } });
    const ids = logLines.map((line) => (JSON.parse(line) as { reqId?: string }).reqId);
    assert.ok(ids.includes('log-é-日本-✓'), JSON.stringify(ids.filter((id) => id?.startsWith('log-'))));
    assert.ok(ids.includes('log-latin1-é'));
  });
});

describe('GET /readyz with a dependency that never answers', () => {
  test('is answered anyway: each check is bounded, a required one failing is 503, an optional one degraded', async () => {
    const app = Fastify();
    const silent = (name: string, required: boolean): ReadinessCheck => ({
      name,
      required,
      check: () => new Promise<boolean>(() => {}),
    });
    await app.register(opsRoutes, {
      store: svc.runtime.store,
      registry: new Registry(),
      readiness: [silent('redis', false), silent('other', true)],
    });
    try {
      // Not a timing assertion: without a bound the answer never comes, and the guard says so.
      let guard: NodeJS.Timeout | undefined;
      const res = await Promise.race([
        app.inject({ method: 'GET', url: '/readyz' }),
        new Promise<never>((_, reject) => {
          guard = setTimeout(() => reject(new Error('/readyz never answered')), 20_000);
        }),
      ]).finally(() => clearTimeout(guard));
      assert.equal(res.statusCode, 503);
      assert.deepEqual(res.json(), {
        status: 'not ready',
        checks: { database: true, redis: false, other: false },
      });
    } finally {
      await app.close();
    }
  });
});

describe('GET /readyz under a flood of probes', () => {
  test('probes arriving while a check runs share it; a probe after it checks again', async () => {
    const app = Fastify();
    let checks = 0;
    let finish!: () => void;
    const gate = new Promise<void>((resolve) => (finish = resolve));
    const slow: ReadinessCheck = {
      name: 'slow',
      check: async () => {
        checks++;
        await gate;
        return true;
      },
    };
    await app.register(opsRoutes, { store: svc.runtime.store, registry: new Registry(), readiness: [slow] });
    try {
      const probes = Array.from({ length: 20 }, () => app.inject({ method: 'GET', url: '/readyz' }));
      await eventually(async () => (checks >= 1 ? true : undefined), 5_000, 'the first check');
      finish();
      const answers = await Promise.all(probes);
      assert.deepEqual(new Set(answers.map((a) => a.statusCode)), new Set([200]));
      assert.equal(checks, 1, 'one check for twenty concurrent probes');
      assert.equal((await app.inject({ method: 'GET', url: '/readyz' })).statusCode, 200);
      assert.equal(checks, 2, 'a later probe is not answered from the earlier check');
    } finally {
      await app.close();
    }
  });
});

describe('SVC_OPS_LISTEN in role api', () => {
  test('the probes and metrics are served there only, not on the public listener', async () => {
    const separate = await startTestService({ env: { SVC_OPS_LISTEN: '127.0.0.1:0' } });
    try {
      await separate.newPlatform(); // loopback on an allow-list: what the public listener answers is its own
      const opsUrl = separate.runtime.opsUrl;
      assert.ok(opsUrl, 'an ops listener');
      const metrics = await fetch(`${opsUrl}/metrics`);
      assert.equal(metrics.status, 200);
      assert.match(await metrics.text(), /^svc_webhook_pending /m);
      assert.equal((await fetch(`${opsUrl}/readyz`)).status, 200);
      assert.equal((await fetch(`${opsUrl}/healthz`)).status, 200);
      for (const path of ['/metrics', '/readyz', '/healthz']) {
        // Paths the public listener has no route for: its caller authenticated first (wire-contract §9).
        const res = await fetch(`${separate.url}${path}`);
        assert.equal(res.status, 401, path);
      }
      // The API itself is where it was, and its documents with it (review: the ops listener served /docs too).
      assert.equal((await fetch(`${separate.url}/time`)).status, 200);
      assert.equal((await fetch(`${separate.url}/docs/json`)).status, 200);
      for (const path of ['/docs', '/docs/json', '/time'])
        assert.equal((await fetch(`${opsUrl}${path}`)).status, 404, path);
    } finally {
      await separate.close();
    }
  });
});
