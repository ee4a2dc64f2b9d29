import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import { createLaneBook, type BookRow } from '../../src/domain/webhooks/lane-book.ts';

/** The book's rules on their own, with a clock the tests move (the reads that feed it: lane-reads tests). */
let seq = 0;
function row(platform: string, resource: string, overrides: Partial<BookRow> = {}): BookRow {
  seq++;
  return {
    notification_id: `n${seq}`,
    seq,
    lane_partition: 0,
    platform_code: platform,
    resource_key: resource,
    state_token: `t${seq}`,
    wait_ms: 0,
    ...overrides,
  };
}

function book(options: { headsPerLane?: number; maxHeadsPerLane?: number } = {}) {
  const clock = { ms: 1_000 };
  const lanes = createLaneBook<BookRow>({
    now: () => clock.ms,
    headsPerLane: options.headsPerLane ?? 20,
    maxHeadsPerLane: options.maxHeadsPerLane ?? 40,
  });
  const ids = (limit: number, capped?: { platforms: string[]; limit: number }) =>
    lanes
      .claim(limit, capped)
      .map((c) => `${c.lane.resourceKey}:${c.heads.map((h) => h.notification_id).join(',')}`);
  return { clock, lanes, ids };
}

describe('lane book', () => {
  test("a lane's notifications come in seq order, one claim of the lane at a time, until released", () => {
    const { lanes, ids } = book();
    const [a1, a2, b1, a3] = [row('P', 'a'), row('P', 'a'), row('P', 'b'), row('P', 'a')];
    // Read out of order (a3's transaction committed first): placed by seq.
    lanes.add([a3!, b1!, a1!]);
    lanes.add([a2!]);
    assert.deepEqual(ids(10), [
      `a:${a1!.notification_id},${a2!.notification_id},${a3!.notification_id}`,
      `b:${b1!.notification_id}`,
    ]);
    assert.deepEqual(ids(10), [], 'held lanes are not claimed again');
    lanes.settled({ platformCode: 'P', resourceKey: 'a' }, a1!.notification_id, a1!.state_token, null);
    lanes.release({ platformCode: 'P', resourceKey: 'a' });
    assert.deepEqual(ids(10), [`a:${a2!.notification_id},${a3!.notification_id}`]);
    assert.deepEqual(lanes.size(), { heads: 3, lanes: 2 });
  });

  test('a claim takes the platforms in turn, and no more of the capped ones than their limit', () => {
    const { lanes, ids } = book();
    lanes.add([row('BUSY', 'x1'), row('BUSY', 'x2'), row('BUSY', 'x3'), row('QUIET', 'y1')]);
    const first = ids(2);
    assert.equal(first.length, 2);
    assert.ok(first.some((c) => c.startsWith('x')) && first.some((c) => c.startsWith('y')), first.join(' '));
    lanes.add([row('QUIET', 'y2')]);
    const second = ids(10, { platforms: ['BUSY'], limit: 1 });
    assert.equal(second.filter((c) => c.startsWith('x')).length, 1, second.join(' '));
    assert.equal(second.filter((c) => c.startsWith('y')).length, 1, second.join(' '));
    assert.equal(ids(10).length, 1, 'the capped lane left is claimed once uncapped');
  });

  test('a retry waits for its time, with its new state, and says when it is due', () => {
    const { clock, lanes, ids } = book();
    const r = row('P', 'a');
    lanes.add([r]);
    assert.equal(lanes.nextDueInMs(), 0);
    const [claim] = lanes.claim(1);
    assert.equal(claim!.heads[0]!.due, true);
    lanes.settled(claim!.lane, r.notification_id, r.state_token, {
      update: { state_token: 'retry-1' },
      waitMs: 5_000,
    });
    lanes.release(claim!.lane);
    assert.deepEqual(ids(10), []);
    assert.equal(lanes.nextDueInMs(), 5_000);
    assert.equal(lanes.nextDueInMs(['P']), null, 'an excluded platform is not waited for');
    clock.ms += 5_000;
    const [again] = lanes.claim(1);
    assert.equal(again!.heads[0]!.state_token, 'retry-1');
  });

  test('a lane whose first notification waits is claimed with it not due, and its wait', () => {
    const { clock, lanes } = book();
    lanes.add([row('P', 'a', { wait_ms: 500 })]);
    assert.equal(lanes.claim(1).length, 0);
    clock.ms += 500;
    const [claim] = lanes.claim(1);
    assert.equal(claim!.heads[0]!.due, true);
  });

  test('reads are deduplicated: the same state twice is one, a stale read after a record is skipped, a new state replaces', () => {
    const { lanes, ids } = book();
    const [a1, a2] = [row('P', 'a'), row('P', 'a')];
    lanes.add([a1!, a2!]);
    lanes.add([a1!]);
    assert.equal(lanes.size().heads, 2);
    const [claim] = lanes.claim(1);
    lanes.settled(claim!.lane, a1!.notification_id, a1!.state_token, null);
    lanes.add([a1!]); // read before the record landed
    lanes.release(claim!.lane);
    assert.deepEqual(ids(10), [`a:${a2!.notification_id}`]);
    lanes.release(claim!.lane);
    // An operator redelivers a1: a new token, back in front of a2.
    lanes.add([{ ...a1!, state_token: 'redelivered' }]);
    const [again] = lanes.claim(1);
    assert.deepEqual(
      again!.heads.map((h) => [h.notification_id, h.state_token]),
      [
        [a1!.notification_id, 'redelivered'],
        [a2!.notification_id, a2!.state_token],
      ],
    );
  });

  test('a read that lands after two records of one notification is stale, whichever token it brings', () => {
    const { lanes } = book();
    const r = row('P', 'a');
    lanes.add([r]);
    const [claim] = lanes.claim(1);
    // A fast retry: two records of r, T → T2 → T3, then a read begun before both.
    lanes.settled(claim!.lane, r.notification_id, r.state_token, {
      update: { state_token: 'T2' },
      waitMs: 0,
    });
    lanes.settled(claim!.lane, r.notification_id, 'T2', { update: { state_token: 'T3' }, waitMs: 0 });
    assert.deepEqual(lanes.add([r]), []);
    lanes.release(claim!.lane);
    assert.equal(lanes.claim(1)[0]!.heads[0]!.state_token, 'T3');
  });

  test('after 250,000 records the latest 100,000 retired tokens still mark stale reads', () => {
    const { lanes } = book();
    const settledRows: BookRow[] = [];
    for (let i = 0; i < 250_000; i++) {
      const r = row('P', `r${i}`);
      lanes.add([r]);
      const [claim] = lanes.claim(1);
      lanes.settled(claim!.lane, r.notification_id, r.state_token, null);
      lanes.release(claim!.lane);
      settledRows.push(r);
    }
    // A read begun before the latest records landed brings them back: all stale, none taken in.
    lanes.add(settledRows.slice(-100_000));
    assert.deepEqual(lanes.size(), { heads: 0, lanes: 0 });
    // The oldest are forgotten (the bound): one read back now is taken in as undelivered.
    lanes.add([settledRows[0]!]);
    assert.deepEqual(lanes.size(), { heads: 1, lanes: 1 });
  });

  test('trim keeps the first notification of lanes waiting for a retry, latest due first; the rest are read again once it is done', () => {
    const { clock, lanes } = book();
    // Lane a's first notification waits 60 s for a retry, b's 120 s, and the others behind them are pending; c is due
    // now: 5 notifications each.
    const lane = (resource: string, retryInMs: number) =>
      Array.from({ length: 5 }, (_, i) => row('P', resource, { wait_ms: i === 0 ? retryInMs : 0 }));
    const [a, b, c] = [lane('a', 60_000), lane('b', 120_000), lane('c', 0)];
    lanes.add([...a, ...b, ...c]);
    assert.deepEqual(lanes.size(), { heads: 15, lanes: 3 });

    // Down to 11: b, due last, is trimmed first, and that is enough.
    assert.equal(lanes.trim(11), 4);
    assert.deepEqual(lanes.size(), { heads: 11, lanes: 3 });
    // Down to 0: a is trimmed too; c, due, is not.
    assert.equal(lanes.trim(0), 4);
    assert.deepEqual(lanes.size(), { heads: 7, lanes: 3 });
    assert.deepEqual(lanes.wantsRefill(), [], 'a lane waiting for its retry is not read again yet');
    // Trimmed lanes ignore their later notifications from the cursor: the refill reads them, in order.
    lanes.add([a[3]!]);
    assert.deepEqual(lanes.size(), { heads: 7, lanes: 3 });

    // a comes due: a slot gets its first notification alone; once that is delivered, the rest are read again.
    clock.ms += 60_000;
    const claims = lanes.claim(10);
    const claimOfA = claims.find((claim) => claim.lane.resourceKey === 'a')!;
    assert.deepEqual(
      claimOfA.heads.map((h) => h.notification_id),
      [a[0]!.notification_id],
    );
    lanes.settled(claimOfA.lane, a[0]!.notification_id, a[0]!.state_token, null);
    assert.deepEqual(lanes.wantsRefill(), [{ lane: claimOfA.lane, afterSeq: a[0]!.seq }]);
    lanes.refilled(claimOfA.lane, a.slice(1), true, a[0]!.seq);
    lanes.release(claimOfA.lane);
    assert.deepEqual(
      lanes
        .claim(10)
        .find((claim) => claim.lane.resourceKey === 'a')!
        .heads.map((h) => h.notification_id),
      a.slice(1).map((r) => r.notification_id),
    );
  });

  test('a trimmed lane whose first notification fails again is not read again until that is done', () => {
    const { clock, lanes } = book();
    const a = Array.from({ length: 3 }, (_, i) => row('P', 'a', { wait_ms: i === 0 ? 1_000 : 0 }));
    lanes.add(a);
    lanes.trim(0);
    clock.ms += 1_000;
    const [claim] = lanes.claim(1);
    lanes.settled(claim!.lane, a[0]!.notification_id, a[0]!.state_token, {
      update: { state_token: 'next-round' },
      waitMs: 30_000,
    });
    lanes.release(claim!.lane);
    assert.deepEqual(lanes.wantsRefill(), []);
    assert.deepEqual(lanes.size(), { heads: 1, lanes: 1 });
  });

  test('a refill answer asked for before the lane let go of more is dropped, and asked again', () => {
    const { clock, lanes } = book();
    const a = Array.from({ length: 5 }, (_, i) => row('P', 'a', { wait_ms: i === 0 ? 1_000 : 0 }));
    lanes.add(a);
    lanes.trim(0);
    // An answer to a question asked after a[1] (before the trim let go of a[1]): taken in, a[1] would be skipped.
    lanes.refilled({ platformCode: 'P', resourceKey: 'a' }, a.slice(2), true, a[1]!.seq);
    assert.deepEqual(lanes.size(), { heads: 1, lanes: 1 });
    clock.ms += 1_000;
    const [claim] = lanes.claim(1);
    lanes.settled(claim!.lane, a[0]!.notification_id, a[0]!.state_token, null);
    assert.deepEqual(lanes.wantsRefill(), [{ lane: claim!.lane, afterSeq: a[0]!.seq }]);
    lanes.refilled(claim!.lane, a.slice(1), true, a[0]!.seq);
    lanes.release(claim!.lane);
    assert.deepEqual(
      lanes.claim(1)[0]!.heads.map((h) => h.notification_id),
      a.slice(1).map((r) => r.notification_id),
    );
  });

  test('trim leaves a lane whose retry time has come, though no claim has taken it yet', () => {
    const { clock, lanes } = book();
    lanes.add(Array.from({ length: 3 }, (_, i) => row('P', 'a', { wait_ms: i === 0 ? 1_000 : 0 })));
    clock.ms += 1_000;
    assert.equal(lanes.trim(0), 0);
    assert.deepEqual(lanes.size(), { heads: 3, lanes: 1 });
  });

  test("the next due is the soonest of the platforms not excluded, each platform's timers apart", () => {
    const { clock, lanes } = book();
    lanes.add([row('S', 'a', { wait_ms: 1_000 }), row('S', 'b', { wait_ms: 2_000 })]);
    lanes.add([row('P', 'c', { wait_ms: 3_000 }), row('Q', 'd', { wait_ms: 4_000 })]);
    assert.equal(lanes.nextDueInMs(), 1_000);
    assert.equal(lanes.nextDueInMs(['S']), 3_000);
    assert.equal(lanes.nextDueInMs(['S', 'P']), 4_000);
    assert.equal(lanes.nextDueInMs(['S', 'P', 'Q']), null);
    clock.ms += 3_000;
    assert.deepEqual(
      lanes
        .claim(10)
        .map((c) => c.lane.resourceKey)
        .sort(),
      ['a', 'b', 'c'],
    );
    assert.equal(lanes.nextDueInMs(), 1_000);
  });

  test('a lane whose order changes under its slot is named, so that the slot stops', () => {
    const { lanes } = book();
    const [early, later] = [row('P', 'a'), row('P', 'a')];
    lanes.add([later]);
    const [claim] = lanes.claim(1);
    // Appended after what the slot holds: nothing to say. Placed before it (a late commit): the slot's copy is stale.
    assert.deepEqual(lanes.add([row('P', 'a')]), []);
    assert.deepEqual(lanes.add([early]), [claim!.lane]);
  });

  test('a lane holds at most maxHeadsPerLane, and asks for a refill, in order, once it runs low', () => {
    const { lanes } = book({ headsPerLane: 2, maxHeadsPerLane: 4 });
    const rows = Array.from({ length: 10 }, () => row('P', 'long'));
    lanes.add(rows);
    assert.equal(lanes.size().heads, 4);
    assert.deepEqual(lanes.wantsRefill(), []);
    const laneOf = { platformCode: 'P', resourceKey: 'long' };
    const [claim] = lanes.claim(1);
    assert.deepEqual(
      claim!.heads.map((h) => h.seq),
      [rows[0]!.seq, rows[1]!.seq],
    );
    for (const r of rows.slice(0, 3)) lanes.settled(laneOf, r.notification_id, r.state_token, null);
    assert.deepEqual(lanes.wantsRefill(), [{ lane: laneOf, afterSeq: rows[3]!.seq }]);
    // A notification of the lane read meanwhile by the cursor is left to the refill.
    lanes.add([row('P', 'long')]);
    assert.equal(lanes.size().heads, 1);
    lanes.refilled(laneOf, rows.slice(4, 7), false, rows[3]!.seq);
    lanes.release(laneOf);
    const [next] = lanes.claim(1);
    assert.deepEqual(
      next!.heads.map((h) => h.seq),
      [rows[3]!.seq, rows[4]!.seq],
    );
    for (const r of rows.slice(3, 6)) lanes.settled(laneOf, r.notification_id, r.state_token, null);
    assert.deepEqual(lanes.wantsRefill(), [{ lane: laneOf, afterSeq: rows[6]!.seq }]);
    lanes.refilled(laneOf, rows.slice(7), true, rows[6]!.seq);
    assert.deepEqual(lanes.wantsRefill(), []);
    lanes.release(laneOf);
    assert.deepEqual(
      lanes.claim(1)[0]!.heads.map((h) => h.seq),
      [rows[6]!.seq, rows[7]!.seq],
    );
  });

  test("a partition's lanes are dropped only while no slot holds one; a frozen partition's are not claimed", () => {
    const { lanes } = book();
    lanes.add([row('P', 'a', { lane_partition: 3 }), row('P', 'b', { lane_partition: 4 })]);
    const [claim] = lanes.claim(1);
    const held = claim!.lane.resourceKey === 'a' ? 3 : 4;
    assert.equal(lanes.dropPartition(held), false);
    assert.equal(lanes.dropPartition(held === 3 ? 4 : 3), true);
    assert.equal(lanes.size().lanes, 1);
    assert.equal(lanes.nextDueInMs(), null, "the dropped lane's queue entry is stale");
    // A partition lost while its lane is worked: the lane, given back, is not claimed again; then dropped.
    lanes.add([row('P', claim!.lane.resourceKey, { lane_partition: held })]);
    lanes.freezePartition(held);
    lanes.release(claim!.lane);
    assert.deepEqual(lanes.claim(10), []);
    assert.equal(lanes.dropPartition(held), true);
    assert.deepEqual(lanes.size(), { heads: 0, lanes: 0 });
    // Taken again later: its lanes are claimed as before.
    lanes.add([row('P', 'c', { lane_partition: held })]);
    assert.equal(lanes.claim(10).length, 1);
  });
});
