import { after, before } from 'node:test';
import { startTestService, type TestService } from './test-service.ts';
import {
  record,
  startWebhookReceiver,
  waitFor,
  type ReceivedDelivery,
  type TestReceiver,
} from './webhook-receiver.ts';

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
  /**
   * On two new platforms (`platformsOnEach`): records `backlog` lanes of `a`, waits until the first of them are
   * being attempted, then records one notification of `b` and waits for its delivery.
   */
  backlogThenOther(backlog: number): Promise<{ a: string; b: string; delivered: ReceivedDelivery }>;
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
    async backlogThenOther(backlog: number) {
      const db = set.svc.runtime.store.db;
      const { a, b } = await set.platformsOnEach();
      for (let i = 0; i < backlog; i++) await record(db, a, `trade:hang-${i}`, { i });
      await waitFor(() => set.hanging.deliveries.length >= 2, "the hanging platform's first attempts");
      const id = await record(db, b, 'trade:healthy-1', { b: 1 });
      const delivered = await waitFor(
        () => set.healthy.deliveries.find((d) => d.notificationId === id),
        "the other platform's first notification",
        60_000,
      );
      return { a, b, delivered };
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
