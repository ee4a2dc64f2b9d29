import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import fc from 'fast-check';
import { loadConfig } from '../../src/config.ts';
import { attemptsPerRound, retryDelay } from '../../src/domain/webhooks/delivery-schedule.ts';
import { createBatcher } from '../../src/domain/webhooks/statement-batcher.ts';

/** wire-contract §5 "Delivery": the retry schedule, as data from config. */
const defaults = loadConfig({}).webhooks;

describe('webhook retry schedule', () => {
  test('the default is 4 × 250 ms, then 5 s, 30 s, 2 min, 10 min, 30 min, 1 h, 2 h, 4 h, 8 h, 16 h ± 20 %, then dead', () => {
    assert.equal(defaults.fastRetries, 4);
    assert.equal(defaults.fastRetryDelayMs, 250);
    assert.deepEqual(
      defaults.retryScheduleMs,
      [5, 30, 120, 600, 1800, 3600, 7200, 14400, 28800, 57600].map((s) => s * 1000),
    );
    assert.equal(defaults.jitter, 0.2);
    assert.equal(attemptsPerRound(defaults), 15);
    for (let failed = 1; failed <= 4; failed++)
      assert.equal(
        retryDelay(defaults, failed, () => 0),
        250,
      );
    assert.equal(
      retryDelay(defaults, 5, () => 0.5),
      5_000,
    );
    assert.equal(
      retryDelay(defaults, 14, () => 0.5),
      57_600_000,
    );
    assert.equal(retryDelay(defaults, 15), null, 'after the 15th attempt: dead letter');
  });

  test('scheduled retries stay within ±20 % of their entry; fast retries are exact', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 14 }),
        fc.double({ min: 0, max: 1, noNaN: true, maxExcluded: true }),
        (failed, r) => {
          const delay = retryDelay(defaults, failed, () => r)!;
          if (failed <= 4) return delay === 250;
          const base = defaults.retryScheduleMs[failed - 5]!;
          return delay >= Math.floor(base * 0.8) && delay <= Math.ceil(base * 1.2);
        },
      ),
    );
  });

  test('configurable: SVC_WEBHOOK_FAST_RETRIES, SVC_WEBHOOK_FAST_RETRY_DELAY_MS, SVC_WEBHOOK_RETRY_SCHEDULE', () => {
    const config = loadConfig({
      SVC_WEBHOOK_FAST_RETRIES: '2',
      SVC_WEBHOOK_FAST_RETRY_DELAY_MS: '10',
      SVC_WEBHOOK_RETRY_SCHEDULE: '100ms,1s',
    }).webhooks;
    assert.equal(attemptsPerRound(config), 5);
    assert.deepEqual(
      [1, 2, 3, 4, 5].map((n) => retryDelay(config, n, () => 0.5)),
      [10, 10, 100, 1000, null],
    );
    assert.throws(
      () => loadConfig({ SVC_WEBHOOK_RETRY_SCHEDULE: '5 seconds' }),
      /SVC_WEBHOOK_RETRY_SCHEDULE/,
    );
    assert.throws(() => retryDelay(config, 0), RangeError);
  });
});

describe('statement batcher', () => {
  test('calls of one turn share a batch, same-key calls go to the next batch, results return to their callers', async () => {
    const batches: string[][] = [];
    const batcher = createBatcher({
      maxSize: 3,
      key: (item: string) => item.split('#')[0]!,
      run: async (items: string[]) => {
        batches.push(items);
        return items.map((i) => i.toUpperCase());
      },
    });
    const results = await Promise.all(['a#1', 'b#1', 'a#2', 'c#1', 'd#1'].map((i) => batcher.call(i)));
    assert.deepEqual(results, ['A#1', 'B#1', 'A#2', 'C#1', 'D#1']);
    assert.deepEqual(batches, [
      ['a#1', 'b#1', 'c#1'],
      ['a#2', 'd#1'],
    ]);
  });

  test('weighted items fill a batch by their weight; one heavier than maxSize goes alone', async () => {
    const batches: string[][] = [];
    const batcher = createBatcher({
      maxSize: 5,
      key: (item: string) => item,
      weight: (item: string) => item.length,
      run: async (items: string[]) => {
        batches.push(items);
        return items;
      },
    });
    await Promise.all(['aa', 'bbb', 'c', 'dddddd', 'ee'].map((i) => batcher.call(i)));
    assert.deepEqual(batches, [['aa', 'bbb'], ['c', 'ee'], ['dddddd']]);
  });

  test('a failed batch is retried item by item, so only the bad item fails', async () => {
    const runs: string[][] = [];
    const batcher = createBatcher({
      maxSize: 10,
      key: (item: string) => item,
      run: async (items: string[]) => {
        runs.push(items);
        if (items.includes('bad')) throw new Error('bad row');
        return items;
      },
    });
    const settled = await Promise.allSettled(['x', 'bad', 'y'].map((i) => batcher.call(i)));
    assert.deepEqual(
      settled.map((s) => s.status),
      ['fulfilled', 'rejected', 'fulfilled'],
    );
    assert.deepEqual(runs, [['x', 'bad', 'y'], ['x'], ['bad'], ['y']]);
  });
});

describe('statement batcher in flight', () => {
  test('with maxInFlight 1, calls made while a batch runs wait for it and then go together', async () => {
    const batches: string[][] = [];
    let finishFirst!: () => void;
    const firstMayFinish = new Promise<void>((resolve) => (finishFirst = resolve));
    const batcher = createBatcher({
      maxSize: 100,
      maxInFlight: 1,
      key: (item: string) => item,
      run: async (items: string[]) => {
        batches.push(items);
        if (batches.length === 1) await firstMayFinish;
        return items;
      },
    });
    const first = batcher.call('a');
    await new Promise((r) => setImmediate(r));
    // The first batch is running: these three wait, across several turns, and then share one batch.
    const later = [batcher.call('b')];
    await new Promise((r) => setImmediate(r));
    later.push(batcher.call('c'), batcher.call('d'));
    await new Promise((r) => setImmediate(r));
    assert.deepEqual(batches, [['a']]);
    finishFirst();
    assert.deepEqual(await Promise.all([first, ...later]), ['a', 'b', 'c', 'd']);
    assert.deepEqual(batches, [['a'], ['b', 'c', 'd']]);
  });
});

describe('statement batcher spacing', () => {
  test('with minGapMs, calls made soon after a batch wait out the gap and go together; a full batch does not wait', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    let clock = 1_000;
    const batches: string[][] = [];
    const batcher = createBatcher({
      maxSize: 3,
      minGapMs: 5,
      now: () => clock,
      key: (item: string) => item,
      run: async (items: string[]) => {
        batches.push(items);
        return items;
      },
    });
    const turn = () => new Promise((r) => setImmediate(r));
    // Nothing was sent for a while: the first call goes at once.
    await batcher.call('a');
    assert.deepEqual(batches, [['a']]);
    // Within the gap: held, across turns, until it has passed.
    const held = [batcher.call('b')];
    await turn();
    held.push(batcher.call('c'));
    await turn();
    assert.deepEqual(batches, [['a']], 'nothing is sent within the gap');
    clock += 5;
    t.mock.timers.tick(5);
    await Promise.all(held);
    assert.deepEqual(batches, [['a'], ['b', 'c']]);
    // maxSize calls waiting: sent without waiting for the gap.
    await Promise.all(['d', 'e', 'f'].map((i) => batcher.call(i)));
    assert.deepEqual(batches, [['a'], ['b', 'c'], ['d', 'e', 'f']]);
  });

  test('with weights, what waits within the gap is counted by weight, before and after a batch leaves', async (t) => {
    t.mock.timers.enable({ apis: ['setTimeout'] });
    let clock = 1_000;
    const batches: string[][] = [];
    const batcher = createBatcher({
      maxSize: 4,
      minGapMs: 5,
      now: () => clock,
      key: (item: string) => item,
      weight: (item: string) => item.length,
      run: async (items: string[]) => {
        batches.push(items);
        return items;
      },
    });
    const turn = () => new Promise((r) => setImmediate(r));
    await batcher.call('a');
    // Within the gap: 'bb' (2) waits; with 'cc' the weight waiting is maxSize (4): they go without waiting.
    const first = [batcher.call('bb')];
    await turn();
    assert.deepEqual(batches, [['a']], 'a weight below maxSize waits out the gap');
    first.push(batcher.call('cc'));
    await Promise.all(first);
    assert.deepEqual(batches, [['a'], ['bb', 'cc']]);
    // The weight that left is no longer counted: 'ddd' (3) alone waits out the gap.
    const second = batcher.call('ddd');
    await turn();
    assert.deepEqual(batches, [['a'], ['bb', 'cc']], 'what left no longer counts');
    clock += 5;
    t.mock.timers.tick(5);
    await second;
    assert.deepEqual(batches, [['a'], ['bb', 'cc'], ['ddd']]);
  });
});
