import assert from 'node:assert/strict';
import { test } from 'node:test';
import { serviceWithHangingAndHealthyReceivers } from '../helpers/slot-sharing.ts';

/**
 * One platform's receiver that hangs does not keep a worker's slots from every other platform for its whole
 * round of fast retries: a lane whose attempt timed out is given back, due at its retry, rather than waiting
 * for it in place. One worker with two slots here, four hanging lanes, and a short timeout.
 */
const set = serviceWithHangingAndHealthyReceivers();

test("a platform whose receiver hangs holds a slot for one attempt at a time, not for its lanes' fast retries", async () => {
  const { delivered } = await set.backlogThenOther(4);
  const { hanging } = set;
  // Held in place, the first two lanes would each have made all five attempts of their round (the first
  // and four fast retries) before anything else got a slot. Counted up to the delivery itself, not up to when
  // this test noticed it.
  const attempts = new Map<string, number>();
  for (const d of hanging.deliveries.filter((d) => d.at <= delivered.at))
    attempts.set(d.notificationId, (attempts.get(d.notificationId) ?? 0) + 1);
  assert.ok(
    Math.max(...attempts.values()) <= 2,
    `attempts per hanging notification when the other platform's went out: ${[...attempts.values()]}`,
  );
});
