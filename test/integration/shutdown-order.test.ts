import assert from 'node:assert/strict';
import { connect } from 'node:net';
import { test } from 'node:test';
import { startTestService } from '../helpers/test-service.ts';
import { record, startWebhookReceiver, waitFor } from '../helpers/webhook-receiver.ts';

/**
 * DESIGN §6: on a stop, an instance stops taking connections at once, while its worker side lets the webhook
 * attempts under way finish (up to two thirds of SVC_SHUTDOWN_TIMEOUT_MS). The worker side starts after the
 * listeners are bound (a start that fails on a taken port starts no worker); its stop must still come after the
 * listeners have closed, not hold them open for its whole drain (review).
 */

/** Whether a new TCP connection to `port` on the loopback is taken. */
function connects(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect(port, '127.0.0.1');
    socket.once('connect', () => {
      socket.destroy();
      resolve(true);
    });
    socket.once('error', () => resolve(false));
  });
}

test('a stopping instance refuses new connections while a webhook attempt under way still drains', async () => {
  const receiver = await startWebhookReceiver(() => 'hang');
  // The attempt may drain for 20 s: far longer than the listener may take to close.
  const svc = await startTestService({ env: { SVC_ROLE: 'all', SVC_SHUTDOWN_TIMEOUT_MS: '30000' } });
  let closing: Promise<void> | null = null;
  try {
    const code = (await svc.newPlatform()).platform.platform_code;
    await svc.admin.put(`/platforms/${code}/webhook`, { url: receiver.url });
    const id = await record(svc.runtime.store.db, code, 'trade:SHUTDOWN-ORDER');
    await waitFor(() => (receiver.inFlight.get(id) ?? 0) > 0, 'the attempt under way');
    const port = Number(new URL(svc.url).port);
    assert.equal(await connects(port), true);

    closing = svc.close();
    await waitFor(async () => !(await connects(port)), 'the public listener to refuse connections', 10_000);
    assert.equal(receiver.inFlight.get(id), 1, 'the attempt under way is still draining');
  } finally {
    // The receiver gone, the attempt fails and the drain ends.
    await receiver.close();
    await (closing ?? svc.close());
  }
});
