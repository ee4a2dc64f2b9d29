import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { PgListener } from '../../src/store/pg-listener.ts';
import { verifyWebhook } from '../../src/sdk/webhook-verify.ts';
import { capturedLogger } from '../helpers/captured-log.ts';
import { inProcessDelivery } from '../helpers/in-process-delivery.ts';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.ts';
import { startTestService, type TestService } from '../helpers/test-service.ts';
import {
  eventOf,
  heldAnswer,
  record,
  recordEvents,
  startWebhookReceiver,
  waitFor,
  type TestReceiver,
} from '../helpers/webhook-receiver.ts';

/**
 * An operator's change of a webhook reaches a worker whose LISTEN connection is down (the NOTIFY that carries it
 * lost): the worker reads the endpoints again at each poll while it hears nothing, rather than only once the
 * connection is back (review: the old URL got that worker's lanes, with the old secret, for the whole outage).
 */
let svc: TestService;
let proxy: TcpProxy;
let first: TestReceiver;
let second: TestReceiver;
before(async () => {
  svc = await startTestService(); // role api: the worker below is the only one delivering
  proxy = await startTcpProxy(svc.database.url);
  first = await startWebhookReceiver();
  second = await startWebhookReceiver();
});
after(async () => {
  await proxy?.close();
  await first?.close();
  await second?.close();
  await svc?.close();
});

test('a webhook changed while the worker hears no NOTIFY is used from the next poll on, by the lanes in hand too', async () => {
  const listener = new PgListener(proxy.url);
  await listener.start();
  // The worker's reads of the endpoints, counted as they are sent.
  let endpointReads = 0;
  const db = svc.runtime.store.db.withPlugin({
    transformQuery: ({ node }) => {
      if (JSON.stringify(node).includes('webhook_endpoints')) endpointReads++;
      return node;
    },
    transformResult: async ({ result }) => result,
  });
  const { logger, lines } = capturedLogger('info');
  const refreshed = () =>
    lines.filter((l) => l.includes('webhook lanes read afresh after an operator change')).length;
  const worker = inProcessDelivery(svc, { db, pollIntervalMs: 20 }).startWorkerSide(logger, { listener });
  try {
    const code = (await svc.newPlatform()).platform.platform_code;
    await svc.admin.put(`/platforms/${code}/webhook`, { url: first.url });
    const warm = await record(svc.runtime.store.db, code, 'trade:UNHEARD-WARM');
    await waitFor(() => first.deliveries.some((d) => d.notificationId === warm), 'a first delivery');
    await proxy.down(); // the LISTEN connection is gone, and cannot come back
    await waitFor(() => !listener.hearing(), 'the worker hearing nothing');

    // A lane in hand: the first of its two notifications held at the old URL while the webhook changes.
    const first1 = heldAnswer();
    first.setHandler((d) => (eventOf(d) === 1 ? first1.answer : 200));
    const [, laterInLane] = await recordEvents(svc.runtime.store.db, code, 'trade:UNHEARD-LANE', [1, 2]);
    await waitFor(() => first.deliveries.some((d) => eventOf(d) === 1), 'the lane in hand');

    const refreshedBefore = refreshed();
    await svc.admin.put(`/platforms/${code}/webhook`, { url: second.url, secret: 'new-secret' });
    const readsBefore = endpointReads;
    await waitFor(() => endpointReads > readsBefore, 'a read of the endpoints sent after the change');
    await waitFor(() => refreshed() > refreshedBefore, 'the lanes of the platform read afresh');
    first1.release();
    const late = await record(svc.runtime.store.db, code, 'trade:UNHEARD-LATE');
    await waitFor(() => second.deliveries.some((d) => d.notificationId === late), 'the new URL');
    await waitFor(() => second.deliveries.some((d) => d.notificationId === laterInLane), 'the lane moved');
    assert.equal(first.deliveries.filter((d) => d.notificationId === late).length, 0, 'not the old URL');
    assert.equal(
      first.deliveries.filter((d) => d.notificationId === laterInLane).length,
      0,
      "nor the lane's next one (claimed before the change)",
    );
    const moved = second.deliveries.find((d) => d.notificationId === laterInLane)!;
    assert.doesNotThrow(() => verifyWebhook(moved.rawBody, moved.headers, 'new-secret'));
  } finally {
    await proxy.up();
    await worker.close();
    await listener.stop();
  }
});
