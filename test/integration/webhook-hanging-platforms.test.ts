import assert from 'node:assert/strict';
import { test } from 'node:test';
import { serviceWithHangingAndHealthyReceivers } from '../helpers/slot-sharing.ts';
import { record, waitFor } from '../helpers/webhook-receiver.ts';

/**
 * Receivers that hang on more platforms than a worker has slots, none of them known slow yet: each one's first
 * attempt starts like any other's. Their attempts took every slot for a whole attempt timeout, wave after wave,
 * while another platform's webhooks waited (review: 20 s with 8 platforms, 4 slots, 10 s). An attempt running
 * past a second now parks its lane and frees the slot (webhook-dispatcher.ts). One worker, two slots, four
 * hanging platforms, and a timeout long enough (30 s) that no hanging attempt ends during the test.
 */
const TIMEOUT_MS = 30_000;
const set = serviceWithHangingAndHealthyReceivers({ SVC_WEBHOOK_TIMEOUT_MS: String(TIMEOUT_MS) });

test("receivers hanging on more platforms than there are slots do not hold another platform's webhooks for their timeout", async () => {
  const { svc, hanging, healthy } = set;
  const db = svc.runtime.store.db;
  const hangingPlatforms: string[] = [];
  for (let i = 0; i < 4; i++) {
    const code = (await svc.newPlatform()).platform.platform_code;
    await svc.admin.put(`/platforms/${code}/webhook`, { url: hanging.url });
    hangingPlatforms.push(code);
  }
  const healthyPlatform = (await svc.newPlatform()).platform.platform_code;
  await svc.admin.put(`/platforms/${healthyPlatform}/webhook`, { url: healthy.url });
  for (const [i, code] of hangingPlatforms.entries()) await record(db, code, `trade:hang-${i}`, { i });
  await waitFor(() => hanging.deliveries.length >= 2, 'the first hanging attempts take both slots');
  const firstHangingAt = Math.min(...hanging.deliveries.map((d) => d.at));

  const id = await record(db, healthyPlatform, 'trade:healthy', { ok: true });
  const delivered = await waitFor(
    () => healthy.deliveries.find((d) => d.notificationId === id),
    "the healthy platform's notification",
    2 * TIMEOUT_MS,
  );
  // Before, no slot freed until a hanging attempt timed out: the healthy one waited TIMEOUT_MS at the least.
  assert.ok(
    delivered.at - firstHangingAt < TIMEOUT_MS / 3,
    `delivered ${delivered.at - firstHangingAt} ms after the first hanging attempt began (timeout ${TIMEOUT_MS} ms)`,
  );
  // Every hanging platform had its attempt, each one (none retried: none had ended).
  const attempted = hanging.deliveries.map((d) => d.notificationId);
  assert.equal(new Set(attempted).size, attempted.length, 'no hanging notification attempted twice');
  await waitFor(() => hanging.deliveries.length === 4, 'each hanging platform has its attempt under way');

  // Each becomes known slow a second into its attempt (the last one may have just begun).
  await waitFor(
    async () => /^svc_webhook_slow_receivers 4$/m.test(await (await fetch(`${svc.url}/metrics`)).text()),
    'the four hanging receivers known slow in /metrics',
  );
});
