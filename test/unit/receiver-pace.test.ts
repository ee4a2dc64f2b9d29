import assert from 'node:assert/strict';
import { test } from 'node:test';
import { createReceiverPace, FAST_AGAIN_AFTER } from '../../src/domain/webhooks/receiver-pace.ts';

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

test('a receiver is slow once an attempt took over the threshold, and fast again once three in a row are answered within it', () => {
  const { pace: p, changes } = pace();
  p.started('A')(200);
  assert.equal(p.isSlow('A'), false);
  p.started('A')(10_000); // timed out
  assert.equal(p.isSlow('A'), true);
  assert.deepEqual(p.slowPlatforms(), ['A']);
  assert.equal(p.isSlow('B'), false, 'per platform');
  p.started('A')(1_000); // at the threshold: not over it
  p.started('A')(300);
  assert.equal(p.isSlow('A'), true, 'two in time are not yet enough');
  p.started('A')(20);
  assert.equal(p.isSlow('A'), false, `${FAST_AGAIN_AFTER} in a row are`);
  assert.deepEqual(p.slowPlatforms(), []);
  assert.deepEqual(changes, ['A slow', 'A fast'], 'each change is told once (logged)');
});

test('a receiver answering about a second, some over and some under, stays slow rather than flapping', () => {
  const { pace: p, changes } = pace();
  for (let i = 0; i < 100; i++) p.started('A')(i % 3 === 0 ? 1_100 : 900);
  assert.equal(p.isSlow('A'), true);
  assert.deepEqual(changes, ['A slow'], 'one change, not one at each turn (before: 67 lines)');
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
  for (let i = 1; i < FAST_AGAIN_AFTER; i++) p.started('A')(100);
  assert.equal(p.isSlow('A'), false, 'answers in time clear it');
  assert.equal(p.anySlow(), false);
  assert.deepEqual(p.slowPlatforms(), []);
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
