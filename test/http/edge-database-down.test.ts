import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { ManualClock } from '../../src/lib/clock.ts';
import { capturedLogger } from '../helpers/captured-log.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { rawRequest } from '../helpers/probe-app.ts';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.ts';
import { startTestService, type TestService } from '../helpers/test-service.ts';

/**
 * wire-contract §3: with the database gone, every answer is the retryable 503, never a 500 that shows the
 * cause (it named the database's host and port). Here the firewall's allow-list snapshot has expired and
 * cannot be read again, for ordinary paths and for the URLs Fastify's router refuses before routing (which
 * it answers on a context of its own, where our error handler is not installed).
 */
let database: TestDatabase;
let proxy: TcpProxy;
let svc: TestService;
const clock = new ManualClock(Date.now());
const { logger, lines: logLines } = capturedLogger('info');
/** Every log line of the service, parsed. */
const logged = () => logLines.map((line) => JSON.parse(line) as Record<string, unknown>);
before(async () => {
  database = await createTestDatabase();
  proxy = await startTcpProxy(database.url);
  svc = await startTestService({
    clock,
    env: { DATABASE_URL: proxy.url },
    logger,
  });
  await svc.newPlatform();
});
after(async () => {
  await proxy?.up();
  await svc?.close();
  await proxy?.close();
  await database?.drop();
});

test('the database down while the allow-list is reloaded: 503 with svc-allow-retry and a request id, for every URL', async () => {
  const targets = ['/time', '/no-such-path', '/%zz', `/trades/${'x'.repeat(600)}`];
  for (const target of targets) assert.notEqual((await rawRequest(svc.url, 'GET', target)).status, 503);
  await proxy.down();
  clock.advance(31_000); // past the allow-list snapshot's 30 s
  for (const target of targets) {
    const res = await rawRequest(svc.url, 'GET', target);
    assert.equal(res.status, 503, `${target.slice(0, 20)}: ${res.status} ${res.text}`);
    assert.deepEqual(JSON.parse(res.text), { error: 'Service Unavailable' });
    assert.equal(res.headers['svc-allow-retry'], 'true');
    assert.ok(res.headers['x-request-id'], `${target.slice(0, 20)}: a request id`);
  }
  // Each 503 is logged in a line of its own, with its request id and the cause in one line: not a stack
  // trace a request (review: about 900 lines in a 5-second outage at 4 requests in flight).
  const failures = logged().filter((line) => line.msg === 'transient failure');
  assert.equal(failures.length, targets.length);
  for (const line of failures) {
    assert.ok(line.reqId, JSON.stringify(line));
    assert.equal(line.err, undefined, 'no stack');
    assert.match(String(line.error), /\S/);
    assert.doesNotMatch(String(line.error), /\n/);
  }
});
