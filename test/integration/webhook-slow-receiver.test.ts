import assert from 'node:assert/strict';
import { test } from 'node:test';
import { serviceWithHangingAndHealthyReceivers } from '../helpers/slot-sharing.ts';
import { record, waitFor } from '../helpers/webhook-receiver.ts';

/**
 * A platform whose receiver hangs, with a backlog, holds at most half of a worker's slots: another platform's
 * notification recorded after that backlog goes out beside it, not after one attempt timeout per slot for
 * each lane of the backlog (8 lanes, 2 slots, 1.5 s timeout here: 6 s before; a few ms after the first
 * attempts time out, now). One worker, two slots.
 */
const set = serviceWithHangingAndHealthyReceivers();

const BACKLOG = 8;

test("a receiver that hangs holds at most half the slots: another platform's notifications go out beside its backlog", async () => {
  const { svc, hanging, healthy } = set;
  const db = svc.runtime.store.db;
  const { b, delivered: firstDelivered } = await set.backlogThenOther(BACKLOG);
  // Before, every lane of the backlog (older, so first in line) had its first attempt, two at a time, each
  // holding its slot for the whole timeout, before the other platform's lane got a slot.
  const attempted = (until: number) =>
    new Set(hanging.deliveries.filter((d) => d.at <= until).map((d) => d.notificationId)).size;
  assert.ok(
    attempted(firstDelivered.at) <= BACKLOG / 2,
    `hanging notifications attempted before the other platform's went out: ${attempted(firstDelivered.at)} of ${BACKLOG}`,
  );

  const metrics = await (await fetch(`${svc.url}/metrics`)).text();
  assert.match(metrics, /^svc_webhook_slow_receivers 1$/m, 'the slow receiver is shown in /metrics');

  // Once the worker knows the receiver is slow, the other platform keeps a slot of its own: a notification
  // recorded now goes out while the backlog is still being attempted one at a time.
  const second = await record(db, b, 'trade:healthy-2', { b: 2 });
  const secondDelivered = await waitFor(
    () => healthy.deliveries.find((d) => d.notificationId === second),
    "the other platform's second notification",
    60_000,
  );
  assert.ok(
    attempted(secondDelivered.at) < BACKLOG,
    `the whole backlog was attempted before the other platform's second notification went out`,
  );
  // And the hanging platform is not starved: its lanes go on being attempted, one slot at a time.
  await waitFor(
    () => attempted(Date.now()) === BACKLOG,
    "every lane of the hanging platform's backlog",
    60_000,
  );
});
