import assert from 'node:assert/strict';
import { randomUUID } from 'node:crypto';
import { after, before, test } from 'node:test';
import { sql } from 'kysely';
import { loadPartitions } from '../../src/domain/webhooks/lane-reads.repository.ts';
import {
  leasePartitions,
  listAttempts,
  recordAttempts,
  redeliverOne,
  type AttemptRecord,
} from '../../src/domain/webhooks/webhooks.repository.ts';
import { startTestService, type TestService } from '../helpers/test-service.ts';
import { record } from '../helpers/webhook-receiver.ts';

/**
 * The statements of migration 0026 that write, on their own (no worker runs here): how workers share the
 * partitions (webhook_lease_partitions), and what a record of an attempt does and answers (webhook_record_attempts).
 */
let svc: TestService;
before(async () => {
  svc = await startTestService();
});
after(() => svc?.close());

const db = () => svc.runtime.store.db;
const LEASE_MS = 60_000;
const lease = (owner: string, giveBack: number[] = [], wants = true) =>
  leasePartitions(db(), owner, { leaseMs: LEASE_MS, giveBack, wants });
/** Every owner gives back all it holds, and wants none: the next test starts with every partition free. */
async function releaseAll(...owners: string[]): Promise<void> {
  for (const owner of owners) await lease(owner, (await lease(owner, [], false)).partitions, false);
}

test('workers share the partitions: a fair share each, the one over its share told to give back', async () => {
  const a = await lease('share-A');
  assert.equal(a.partitions.length, 64, 'alone, every partition');
  assert.deepEqual((await lease('share-B')).partitions, [], 'none free');
  assert.deepEqual((await lease('share-C')).partitions, [], 'none free');
  const told = await lease('share-A');
  assert.deepEqual([told.fairShare, told.othersShort], [21, true]);
  // A gives back what is over its share; those short take theirs.
  const kept = await lease('share-A', told.partitions.slice(21));
  assert.equal(kept.partitions.length, 21);
  const b = await lease('share-B');
  const c = await lease('share-C');
  assert.deepEqual(
    [b.partitions.length, c.partitions.length].sort(),
    [21, 22],
    'the rest shared: no partition left over, none held twice',
  );
  const all = [...kept.partitions, ...b.partitions, ...c.partitions].sort((x, y) => x - y);
  assert.deepEqual(
    all,
    Array.from({ length: 64 }, (_, i) => i),
  );
  assert.equal((await lease('share-A')).othersShort, false, 'no one short: no one gives back');
  await releaseAll('share-A', 'share-B', 'share-C');
});

test("a worker that wants none (its slots held by hanging receivers) is not counted; an expired lease is anyone's", async () => {
  const stuck = await lease('stuck-A');
  assert.equal(stuck.partitions.length, 64);
  // It wants none and gives back all but one, which it is working.
  const working = stuck.partitions[0]!;
  await lease('stuck-A', stuck.partitions.slice(1), false);
  const other = await lease('stuck-B');
  assert.equal(other.partitions.length, 63, 'the other takes every free one');
  assert.equal(other.fairShare, 64, 'its share counts only the workers that want some');
  // The stuck worker dies: its lease runs out, and the other takes that partition too.
  await sql`update webhook_partitions set lease_until = clock_timestamp() - interval '1 millisecond'
    where lane_partition = ${working}`.execute(db());
  assert.equal((await lease('stuck-B')).partitions.length, 64);
  assert.deepEqual((await lease('stuck-A')).partitions, [], 'and the dead one does not get it back');
  await releaseAll('stuck-A', 'stuck-B');
});

test('a worker that stopped renewing is not short of its share: no partition is left free for it', async () => {
  try {
    assert.equal((await lease('away-A')).partitions.length, 64);
    await lease('away-B');
    await lease('away-C');
    const told = await lease('away-A');
    await lease('away-A', told.partitions.slice(21));
    const b = await lease('away-B');
    assert.equal(b.partitions.length, 21, 'B takes its share (rounded down while C is short too)');
    assert.equal((await lease('away-A')).partitions.length, 21, 'nor does A take one back while C is short');
    // C renews no more (its database away): its last renewal made over half the lease (60 s here) old; its
    // seen_until is still ahead.
    await sql`update webhook_partition_owners set renewed_at = renewed_at - interval '31 seconds'
      where owner = 'away-C'`.execute(db());
    // A and B take the partitions given back for C, and then nothing more is given back or taken.
    const a = await lease('away-A');
    assert.deepEqual(
      [a.othersShort, a.partitions.length],
      [false, 43],
      'C is not short: every free one taken',
    );
    const settled = [await lease('away-B'), await lease('away-A')];
    assert.deepEqual(
      settled.map((l) => [l.partitions.length, l.othersShort, l.fairShare]),
      [
        [21, false, 21],
        [43, false, 21],
      ],
      'every partition held, no one told to give back; C still counted in the share while its lease lasts',
    );
    // C's database comes back: short again at its first renewal, and given its share.
    await lease('away-C');
    const back = await lease('away-A');
    assert.deepEqual([back.othersShort, back.fairShare], [true, 21]);
    await lease('away-A', back.partitions.slice(21));
    assert.equal(
      (await lease('away-C')).partitions.length,
      22,
      'its share, and the one left over by the rounding',
    );
    assert.deepEqual(
      [(await lease('away-A')).othersShort, (await lease('away-B')).othersShort],
      [false, false],
    );
  } finally {
    await releaseAll('away-A', 'away-B', 'away-C');
  }
});

function result(head: Parameters<typeof recordAttempts>[2][number]['head'], record: AttemptRecord) {
  return { head, newStateToken: randomUUID(), record };
}
const failed: AttemptRecord = {
  attempt: { startedAt: new Date(), durationMs: 7, statusCode: 503, error: 'HTTP 503', outcome: 'failed' },
  status: 'retrying',
  statusReason: 'HTTP 503',
  roundAttempts: 1,
  nextAttemptInMs: 250,
};

test('a record applies once: sent again after it committed (its answer lost) it is answered as applied, recorded once', async () => {
  const { platform } = await svc.newPlatform();
  const code = platform.platform_code;
  await svc.admin.put(`/platforms/${code}/webhook`, { url: 'http://127.0.0.1:9/unused' });
  const id = await record(db(), code, 'trade:RECORD');
  const held = await lease('record-A');
  const head = (await loadPartitions(db(), held.partitions, 5)).rows.find((r) => r.notification_id === id)!;
  const item = result(head, failed);
  assert.deepEqual(await recordAttempts(db(), 'record-A', [item]), [{ leaseHeld: true, applied: true }]);
  assert.deepEqual(await recordAttempts(db(), 'record-A', [item]), [{ leaseHeld: true, applied: true }]);
  const listed = await listAttempts(db(), [id]);
  assert.deepEqual(
    listed.map((a) => [a.attempt_number, a.status_code, a.outcome, a.worker]),
    [[1, 503, 'failed', 'record-A']],
  );
  const row = await sql<{ status: string; state_token: string; attempt_count: number }>`
    select status, state_token, attempt_count from webhook_notifications where notification_id = ${id}::uuid`.execute(
    db(),
  );
  assert.deepEqual(row.rows[0], { status: 'retrying', state_token: item.newStateToken, attempt_count: 1 });

  // An operator's redelivery comes before the next record: the attempt is listed, the state is the operator's.
  await redeliverOne(db(), code, id);
  const late = result({ ...head, state_token: item.newStateToken }, failed);
  assert.deepEqual(await recordAttempts(db(), 'record-A', [late]), [{ leaseHeld: true, applied: false }]);
  const after = await sql<{ status: string; attempt_count: number }>`
    select status, attempt_count from webhook_notifications where notification_id = ${id}::uuid`.execute(
    db(),
  );
  assert.deepEqual(after.rows[0], { status: 'pending', attempt_count: 2 });

  // A worker that no longer holds the partition is told so (it stops working the lane).
  await lease('record-A', held.partitions, false);
  const lost = result({ ...head, state_token: randomUUID() }, failed);
  assert.equal((await recordAttempts(db(), 'record-A', [lost]))[0]!.leaseHeld, false);
  await releaseAll('record-A');
});
