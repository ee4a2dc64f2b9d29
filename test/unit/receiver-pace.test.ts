import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createReceiverPace } from '../../src/domain/webhooks/receiver-pace.ts';

/** Which receivers a worker counts as slow (webhook-dispatcher.ts gives them half the slots at most). */
function pace() {
  const clock = { ms: 0 };
  const changes: string[] = [];
  const pace = createReceiverPace({
    slowMs: 1_000,
    now: () => clock.ms,
    onChange: (platformCode, slow) => changes.push(`${platformCode} ${slow ? 'slow' : 'fast'}`),
  });
  return { clock, pace, changes };
}

test('a receiver is slow once an attempt took over the threshold, and fast again at an answer within it once none has been late for 10 s', () => {
  const { clock, pace: p, changes } = pace();
  p.started('A')(200);
  assert.equal(p.isSlow('A'), false);
  p.started('A')(10_000); // timed out
  assert.equal(p.isSlow('A'), true);
  assert.deepEqual(p.slowPlatforms(), ['A']);
  assert.equal(p.isSlow('B'), false, 'per platform');
  p.started('A')(1_000); // at the threshold: not over it
  clock.ms = 9_999;
  p.started('A')(300);
  assert.equal(p.isSlow('A'), true, 'answers in time within 10 s of the late one are not enough');
  clock.ms = 10_000;
  p.started('A')(20);
  assert.equal(p.isSlow('A'), false, 'one 10 s after it is');
  assert.deepEqual(p.slowPlatforms(), []);
  assert.deepEqual(changes, ['A slow', 'A fast'], 'each change is told once (logged)');
});

test('a receiver answering about a second, some over and some under, changes at most once each way in 10 s', () => {
  const { clock, pace: p, changes } = pace();
  // An answer every 50 ms for 100 s, one in five late, at random (a fixed seed: the same run every time).
  let seed = 33;
  const random = () => (seed = (seed * 1_103_515_245 + 12_345) % 2 ** 31) / 2 ** 31;
  for (let i = 0; i < 2_000; i++) {
    clock.ms = i * 50;
    p.started('A')(random() < 0.2 ? 1_100 : 900);
  }
  assert.equal(p.isSlow('A'), true);
  assert.deepEqual(changes, ['A slow'], 'one change (before: one each way at every turn, some 600 lines)');
  // Late answers 30 s apart, in time ones between: slow, then fast 10 s on, once per late one.
  const sparse = pace();
  for (let s = 0; s < 90; s++) {
    sparse.clock.ms = s * 1_000;
    sparse.pace.started('A')(s % 30 === 0 ? 1_100 : 100);
  }
  assert.deepEqual(sparse.changes, ['A slow', 'A fast', 'A slow', 'A fast', 'A slow', 'A fast']);
});

test('an attempt still running past the threshold makes its receiver slow before it ends', () => {
  const { clock, pace: p } = pace();
  const endFirst = p.started('A');
  clock.ms = 500;
  const endSecond = p.started('A');
  assert.equal(p.isSlow('A'), false);
  clock.ms = 1_001;
  assert.equal(p.isSlow('A'), true, 'the first has run over a second');
  assert.equal(p.anySlow(), true);
  assert.deepEqual(p.slowPlatforms(), ['A']);
  endFirst(1_001);
  assert.equal(p.isSlow('A'), true, 'by its end too');
  clock.ms = 1_400;
  endSecond(900);
  assert.equal(p.isSlow('A'), true, 'an answer in time right after a late one does not clear it');
  clock.ms = 11_001;
  p.started('A')(100);
  assert.equal(p.isSlow('A'), false, 'one 10 s after the late one does');
  assert.equal(p.anySlow(), false);
  assert.deepEqual(p.slowPlatforms(), []);
});

test('an answer in time does not clear the mark while another attempt to the receiver runs past the threshold', () => {
  const { clock, pace: p, changes } = pace();
  p.started('A')(1_500);
  clock.ms = 8_000;
  const endHanging = p.started('A');
  clock.ms = 10_000;
  p.started('A')(50);
  assert.equal(p.isSlow('A'), true);
  assert.deepEqual(changes, ['A slow'], 'no "fast" while one hangs');
  endHanging(10_000);
  clock.ms = 20_000;
  p.started('A')(50);
  assert.deepEqual(changes, ['A slow', 'A fast']);
});

test('a slow mark is forgotten after a minute with no attempt to the receiver ending, or when its webhook changes', () => {
  const { clock, pace: p, changes } = pace();
  p.started('A')(10_000);
  p.started('B')(10_000);
  clock.ms = 30_000;
  p.started('B')(5_000); // B is still being attempted, and still slow
  clock.ms = 60_001;
  assert.deepEqual(p.slowPlatforms(), ['B'], 'A: no attempt ended for over a minute');
  const endLong = p.started('B');
  clock.ms = 200_000;
  assert.equal(p.isSlow('B'), true, 'not while an attempt to it is under way');
  endLong(10_000);
  p.forget('B');
  assert.equal(p.anySlow(), false, 'forgotten when an operator changes its webhook');
  assert.deepEqual(changes, ['A slow', 'B slow', 'A fast', 'B fast']);
});

test('after a webhook change, the attempts to the old URL say nothing, running or ended', () => {
  const { clock, pace: p } = pace();
  const endOld = p.started('A');
  clock.ms = 2_000;
  assert.equal(p.isSlow('A'), true, 'hanging');
  p.forget('A'); // the operator points A at a new receiver
  assert.equal(p.isSlow('A'), false, 'the old attempt, still running, is not counted');
  const endNew = p.started('A');
  endOld(10_000); // the old attempt times out
  assert.equal(p.isSlow('A'), false, 'nor once it ends');
  clock.ms = 3_500;
  assert.equal(p.isSlow('A'), true, 'an attempt to the new URL can make it slow again');
  endNew(1_500);
  assert.equal(p.isSlow('A'), true);
});
