import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { rawRequest } from '../helpers/probe-app.ts';
import { startTestService, TEST_ADMIN_TOKEN, type TestService } from '../helpers/test-service.ts';

/**
 * SVC_ADMIN_LISTEN (DESIGN §3): the operator API on a listener of its own, not on the public one. Both apps
 * share the process's metrics registry; a second app used to register the HTTP metrics again, and the
 * process failed at start.
 */
let svc: TestService;
before(async () => {
  svc = await startTestService({ env: { SVC_ADMIN_LISTEN: '127.0.0.1:0' } });
});
after(() => svc?.close());

const adminHeaders = { authorization: `Bearer ${TEST_ADMIN_TOKEN}` };

test('the operator API answers on its own listener only; both listeners count into one /metrics', async () => {
  const { url, adminUrl } = svc.runtime;
  assert.ok(url && adminUrl && adminUrl !== url, `two listeners (${url}, ${adminUrl})`);
  await svc.newPlatform(); // through the operator listener; puts loopback on an allow-list

  const onAdmin = await rawRequest(adminUrl, 'GET', '/admin/platforms', { headers: adminHeaders });
  assert.equal(onAdmin.status, 200);
  const onPublic = await rawRequest(url, 'GET', '/admin/platforms', { headers: adminHeaders });
  // Not on the public listener: a path it has no route for, whose caller it authenticates first (wire-contract §9).
  assert.equal(onPublic.status, 401, 'not on the public listener');
  assert.deepEqual(onPublic.json, { error: 'missing header X-SCX-API-KEY' });

  await rawRequest(url, 'GET', '/time');
  const metrics = (await rawRequest(url, 'GET', '/metrics')).text;
  assert.match(metrics, /svc_http_requests_total\{method="GET",route="\/time",status="200"\} \d+/);
  assert.match(
    metrics,
    /svc_http_requests_total\{method="GET",route="\/admin\/platforms",status="200"\} \d+/,
  );
});

test("each listener's /docs/json documents its own API only (README, Operator API)", async () => {
  const { url, adminUrl } = svc.runtime;
  const operationIds = async (base: string) => {
    const res = await rawRequest(base, 'GET', '/docs/json');
    assert.equal(res.status, 200, res.text);
    const paths = (res.json as { paths: Record<string, Record<string, { operationId?: string }>> }).paths;
    return Object.values(paths).flatMap((methods) =>
      Object.values(methods).map((op) => op.operationId ?? ''),
    );
  };
  const publicOps = await operationIds(url!);
  const operatorOps = await operationIds(adminUrl!);
  assert.ok(
    publicOps.includes('listTrades') && publicOps.includes('executeLiquidityQuote'),
    publicOps.join(),
  );
  assert.deepEqual(
    publicOps.filter((id) => id.startsWith('admin')),
    [],
    'no operator operation on the public listener',
  );
  assert.ok(operatorOps.includes('adminListTrades'), operatorOps.join());
  assert.deepEqual(
    operatorOps.filter((id) => !id.startsWith('admin')),
    [],
    'only operator operations on its listener',
  );
});
