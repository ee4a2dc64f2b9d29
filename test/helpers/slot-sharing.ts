import { after, before } from 'node:test';
import { startTestService, type TestService } from './test-service.ts';
import { startWebhookReceiver, type TestReceiver } from './webhook-receiver.ts';

/**
 * For the tests of how a worker shares its delivery slots between platforms: a service that delivers (role
 * all) with two slots and a 1.5 s attempt timeout, a receiver that hangs and one that answers 200, started
 * before the file's tests and closed after them.
 */
export interface SlotSharingSet {
  svc: TestService;
  hanging: TestReceiver;
  healthy: TestReceiver;
  /** Two new platforms, `a` with its webhook on the receiver that hangs, `b` on the healthy one. */
  platformsOnEach(): Promise<{ a: string; b: string }>;
}

export function serviceWithHangingAndHealthyReceivers(env: Record<string, string> = {}): SlotSharingSet {
  const set = {
    async platformsOnEach() {
      const a = (await set.svc.newPlatform()).platform.platform_code;
      const b = (await set.svc.newPlatform()).platform.platform_code;
      await set.svc.admin.put(`/platforms/${a}/webhook`, { url: set.hanging.url });
      await set.svc.admin.put(`/platforms/${b}/webhook`, { url: set.healthy.url });
      return { a, b };
    },
  } as SlotSharingSet;
  before(async () => {
    set.svc = await startTestService({
      env: {
        SVC_ROLE: 'all',
        SVC_WORKER_CONCURRENCY: '2',
        SVC_WEBHOOK_TIMEOUT_MS: '1500',
        ...env,
      },
    });
    set.hanging = await startWebhookReceiver(() => 'hang');
    set.healthy = await startWebhookReceiver(() => 200);
  });
  after(async () => {
    await set.hanging?.close();
    await set.healthy?.close();
    await set.svc?.close();
  });
  return set;
}
