import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { sql } from 'kysely';
import { startTestService, type TestService } from '../helpers/test-service.ts';
import {
  serviceEnv,
  startReadyWorker,
  stopWorkerProcess,
  type WorkerProcess,
} from '../helpers/webhook-processes.ts';
import { record, startWebhookReceiver, waitFor, type TestReceiver } from '../helpers/webhook-receiver.ts';

/**
 * A worker-only process (`svc serve --role worker`) serves no API; with SVC_OPS_LISTEN it serves
 * /healthz, /readyz and /metrics, so the delivery latency histogram of the processes that deliver webhooks
 * (issue 4 point 8) can be scraped in a deployment of API processes and worker processes.
 */
let svc: TestService;
let receiver: TestReceiver;
let worker: WorkerProcess | undefined;
before(async () => {
  svc = await startTestService();
  receiver = await startWebhookReceiver(() => 204);
});
after(async () => {
  if (worker) await stopWorkerProcess(worker);
  await receiver?.close();
  await svc?.close();
});

test('a worker-only process with SVC_OPS_LISTEN serves its health and its delivery metrics', async () => {
  const { platform } = await svc.newPlatform();
  const code = platform.platform_code;
  await svc.admin.put(`/platforms/${code}/webhook`, { url: receiver.url, secret: 'ops-secret' });
  worker = await startReadyWorker(serviceEnv(svc, { SVC_OPS_LISTEN: '127.0.0.1:0' }));
  const opsUrl = /metrics +(http:\/\/\S+)\/metrics/.exec(worker.output())?.[1];
  assert.ok(opsUrl, `the banner names the ops listener:\n${worker.output()}`);

  for (let i = 0; i < 5; i++) await record(svc.runtime.store.db, code, `trade:OPS${i}`, { i });
  await waitFor(
    async () => {
      const r = await sql<{ n: number }>`select count(*)::int as n from webhook_notifications
        where platform_code = ${code} and status = 'delivered'`.execute(svc.runtime.store.db);
      return r.rows[0]!.n === 5;
    },
    'the five notifications delivered',
    30_000,
  );

  const health = await fetch(`${opsUrl}/healthz`);
  assert.equal(health.status, 200);
  const ready = await fetch(`${opsUrl}/readyz`);
  assert.equal(ready.status, 200);
  const metrics = await (await fetch(`${opsUrl}/metrics`)).text();
  const delivered = /^svc_webhook_delivery_latency_seconds_count (\d+)/m.exec(metrics)?.[1];
  assert.ok(Number(delivered) >= 5, `the worker's own deliveries are in its histogram (count ${delivered})`);
  // A number, or NaN if the queue's first read took longer than a scrape waits (a loaded machine).
  assert.match(metrics, /^svc_webhook_pending (\d+|Nan)$/m);

  const api = await fetch(`${opsUrl}/v1/accounts`);
  assert.equal(api.status, 404, 'no API on the ops listener');
  const admin = await fetch(`${opsUrl}/admin/platforms`, {
    headers: { authorization: 'Bearer test-admin-token-0123456789' },
  });
  assert.equal(admin.status, 404, 'no operator API on the ops listener');
});
