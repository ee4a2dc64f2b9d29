import assert from 'node:assert/strict';
import { describe, test } from 'node:test';
import {
  PARKED_PER_SLOT,
  startDispatcher,
  type DispatcherOptions,
} from '../../src/domain/webhooks/webhook-dispatcher.ts';
import type { ClaimCap, ClaimedLane } from '../../src/domain/webhooks/delivery-lane.ts';

/**
 * The dispatcher's scheduling on its own: lanes come from an in-memory queue standing in for the worker's lane book
 * (the SQL side is covered by test/integration/webhook-lanes.test.ts and the delivery tests).
 */
const lane = (n: number): ClaimedLane => ({
  lane: { platformCode: 'PLAT01', resourceKey: `trade:${n}` },
  heads: [],
});

function deferred<T = void>() {
  let resolve!: (value: T) => void;
  const promise = new Promise<T>((r) => (resolve = r));
  return { promise, resolve };
}

const tick = () => new Promise((r) => setImmediate(r));

async function until(check: () => boolean, what: string): Promise<void> {
  for (let i = 0; i < 1_000 && !check(); i++) await tick();
  assert.ok(check(), what);
}

/** As `until`, for what follows a real timer (a retry's wait, the stuck-slot check): up to 5 s. */
async function untilTimer(check: () => boolean, what: string): Promise<void> {
  const deadline = Date.now() + 5_000;
  while (!check() && Date.now() < deadline) await new Promise((r) => setTimeout(r, 5));
  assert.ok(check(), what);
}

function harness(overrides: Partial<DispatcherOptions> = {}) {
  const due: ClaimedLane[] = [];
  const claims: number[] = [];
  const released: string[] = [];
  const working = new Map<string, ReturnType<typeof deferred<void>>>();
  let maxRunning = 0;
  const clock = { ms: 0 };
  const options: DispatcherOptions = {
    concurrency: 2,
    // Long: anything that happens within a test happens because of a wake-up, not a poll.
    pollIntervalMs: 60_000,
    now: () => clock.ms,
    claim: async (limit) => {
      claims.push(limit);
      return due.splice(0, limit);
    },
    work: async (ready) => {
      const done = deferred();
      working.set(ready.lane.resourceKey, done);
      maxRunning = Math.max(maxRunning, working.size);
      await done.promise;
      working.delete(ready.lane.resourceKey);
    },
    release: async (lanes) => {
      released.push(...lanes.map((l) => l.lane.resourceKey));
    },
    nextDueInMs: async () => null,
    onError: (err) => {
      throw err;
    },
    ...overrides,
  };
  return { due, claims, released, working, options, clock, maxRunning: () => maxRunning };
}

describe('webhook dispatcher', () => {
  test('works at most `concurrency` lanes at once, takes the next one as a slot frees', async () => {
    const h = harness();
    for (let i = 1; i <= 5; i++) h.due.push(lane(i));
    const dispatcher = startDispatcher(h.options);
    await until(() => h.working.size === 2, 'two lanes under way');
    await tick();
    assert.equal(h.working.size, 2, 'not more than the concurrency');
    h.working.get('trade:1')!.resolve();
    await until(() => h.working.has('trade:3'), 'the next lane starts when a slot frees');
    for (const key of ['trade:2', 'trade:3']) h.working.get(key)!.resolve();
    await until(() => h.working.has('trade:5'), 'the rest follow');
    assert.equal(h.maxRunning(), 2);
    const stopped = dispatcher.stop();
    for (const done of h.working.values()) done.resolve();
    await stopped;
  });

  test('stop gives back the lanes not started, however long they waited', async () => {
    const h = harness({ concurrency: 1 });
    h.due.push(lane(1), lane(2));
    const dispatcher = startDispatcher(h.options);
    await until(() => h.working.has('trade:1') && h.claims.length >= 1, 'a lane under way, one ready');
    h.due.push(lane(3));
    h.clock.ms = 60_000;
    dispatcher.wake();
    await until(() => h.claims.length >= 2 && h.due.length === 0, 'trade:3 claimed');
    const stopped = dispatcher.stop();
    h.working.get('trade:1')!.resolve();
    await stopped;
    assert.deepEqual(h.released, ['trade:2', 'trade:3']);
  });

  test('a wake-up while a claim is under way is not lost when that claim comes back short', async () => {
    const h = harness();
    const firstClaim = deferred<ClaimedLane[]>();
    let calls = 0;
    h.options.claim = async (limit) => {
      h.claims.push(limit);
      calls++;
      return calls === 1 ? firstClaim.promise : h.due.splice(0, limit);
    };
    const dispatcher = startDispatcher(h.options);
    await until(() => calls === 1, 'the first claim is under way');
    // A notification is committed (NOTIFY) while the first claim, which did not see it, is still running.
    h.due.push(lane(7));
    dispatcher.wake();
    firstClaim.resolve([]);
    await until(() => h.working.has('trade:7'), 'claimed again at once, not at the next poll');
    h.working.get('trade:7')!.resolve();
    await dispatcher.stop();
  });

  test('idle, it sleeps until the next lane is due', async () => {
    const h = harness({ nextDueInMs: async () => 30 });
    const dispatcher = startDispatcher(h.options);
    await until(() => h.claims.length === 1, 'first claim');
    h.due.push(lane(9)); // due later, with no wake-up: found when the dispatcher looks again
    await untilTimer(
      () => h.working.has('trade:9'),
      'claimed once the next due time came (30 ms, not the 60 s poll)',
    );
    h.working.get('trade:9')!.resolve();
    await dispatcher.stop();
  });

  test('a failed claim is tried again soon, not at the next poll (a minute here)', async () => {
    const errors: string[] = [];
    let calls = 0;
    const h = harness({ onError: (_err, message) => void errors.push(message) });
    h.due.push(lane(11));
    h.options.claim = async (limit) => {
      if (++calls === 1) throw new Error('connection terminated');
      return h.due.splice(0, limit);
    };
    const dispatcher = startDispatcher(h.options);
    await untilTimer(() => h.working.has('trade:11'), 'claimed on the second try, well within the 60 s poll');
    assert.deepEqual(errors, ['webhook lane claim failed']);
    h.working.get('trade:11')!.resolve();
    await dispatcher.stop();
  });

  test('claims that find only lanes with nothing to deliver yet (a producer recording) back off', async () => {
    const h = harness({ nextDueInMs: async () => 0 });
    const io = () => new Promise((r) => setImmediate(r));
    // The same lane, due now and empty, whenever it is not being worked: as its release leaves it until the
    // producer commits.
    let held = false;
    h.options.claim = async (limit) => {
      await io();
      h.claims.push(limit);
      if (held) return [];
      held = true;
      return [lane(12)];
    };
    h.options.work = async () => {
      await io();
      held = false;
    };
    const dispatcher = startDispatcher(h.options);
    await new Promise((r) => setTimeout(r, 500));
    await dispatcher.stop();
    // 5, 10, 20, … 200 ms apart: about 8 in 500 ms; every 5 ms, it was about 100.
    assert.ok(h.claims.length <= 15, `${h.claims.length} claims in 500 ms`);
  });

  test('a claim that brings more deliveries than the prefetch holds gives the excess back at once', async () => {
    // Two slots hold up to 16 deliveries; lanes of 10 notifications each.
    const many = (n: number): ClaimedLane => ({
      ...lane(n),
      heads: Array.from({ length: 10 }, () => ({}) as ClaimedLane['heads'][number]),
    });
    const h = harness();
    for (let i = 1; i <= 16; i++) h.due.push(many(i));
    const dispatcher = startDispatcher(h.options);
    await until(() => h.released.length > 0, 'the excess given back');
    // The first lane (10 of the room for 16) is kept, the second does not fit: 15 lanes given back.
    assert.equal(h.claims[0], 16);
    assert.equal(h.released.length, 15);
    assert.ok(h.working.has('trade:1'));
    // The other slot is free: the next claim asks for as many lanes as its room takes at the size lanes have
    // had lately, not 16 again.
    await until(() => h.claims.length === 2, 'the next claim');
    assert.ok(h.claims[1]! < 8, `asked for ${h.claims[1]} lanes`);
    const stopped = dispatcher.stop();
    for (const done of h.working.values()) done.resolve();
    await stopped;
  });

  test('lanes waiting while every slot stays taken are given back, and said so; no claims until a slot frees', async () => {
    const stuck: number[] = [];
    const h = harness({ concurrency: 1, onSlotsStuck: (lanes) => void stuck.push(lanes) });
    h.due.push(lane(1), lane(2), lane(3));
    const dispatcher = startDispatcher(h.options);
    await until(() => h.working.has('trade:1'), 'the first lane under way (its receiver hangs)');
    assert.equal(h.claims.length, 1);
    h.clock.ms = 1_000; // trade:2 and trade:3 have waited a second for the one slot
    await untilTimer(() => h.released.length >= 2, 'the waiting lanes given back');
    assert.deepEqual(h.released, ['trade:2', 'trade:3'], 'given back');
    assert.deepEqual(stuck, [2], 'told, so that the worker lets others take what it cannot start');
    h.due.push(lane(4));
    dispatcher.wake(); // new work read meanwhile
    await tick();
    assert.equal(h.claims.length, 1, 'no claim while the slot stays taken');
    h.working.get('trade:1')!.resolve();
    await until(() => h.working.has('trade:4'), 'claims again once the slot is free');
    h.working.get('trade:4')!.resolve();
    await dispatcher.stop();
  });

  test('lanes waiting for slots that keep freeing (slow receivers, not hanging ones) are kept', async () => {
    const h = harness({ concurrency: 1 });
    h.due.push(lane(1), lane(2), lane(3));
    const dispatcher = startDispatcher(h.options);
    await until(() => h.working.has('trade:1'), 'the first lane under way');
    h.clock.ms = 900;
    h.working.get('trade:1')!.resolve(); // the slot frees at 900 ms: trade:2 starts
    await until(() => h.working.has('trade:2'), 'the second lane under way');
    h.clock.ms = 1_500; // trade:3 has waited 1.5 s, but a slot freed 0.6 s ago
    // The check runs a second (real) after trade:1 was claimed, and again once the slot has been taken that
    // long by the clock above: it must find nothing to give back.
    await new Promise((r) => setTimeout(r, 1_200));
    assert.deepEqual(h.released, []);
    h.working.get('trade:2')!.resolve();
    await until(() => h.working.has('trade:3'), 'the third lane started here');
    h.working.get('trade:3')!.resolve();
    await dispatcher.stop();
  });

  test('stop aborts the lanes under way, gives back the claimed ones not started, and waits for both', async () => {
    const h = harness();
    for (let i = 1; i <= 5; i++) h.due.push(lane(i));
    let signal: AbortSignal | undefined;
    const work = h.options.work;
    h.options.work = (ready, s, park) => {
      signal = s;
      return work(ready, s, park);
    };
    const dispatcher = startDispatcher(h.options);
    await until(() => h.working.size === 2, 'two lanes under way');
    await until(() => h.claims.length >= 1, 'claimed');
    let stopped = false;
    const stopping = dispatcher.stop().then(() => (stopped = true));
    assert.equal(signal?.aborted, true, 'the lanes under way are told to stop');
    await tick();
    assert.equal(stopped, false, 'waits for the lanes under way');
    for (const done of h.working.values()) done.resolve();
    await stopping;
    assert.deepEqual(
      h.released.sort(),
      ['trade:3', 'trade:4', 'trade:5'],
      'claimed, never started: given back',
    );
  });

  test('a lane parked (its attempt late) frees its slot, up to PARKED_PER_SLOT × concurrency lanes parked', async () => {
    const h = harness();
    const parks = new Map<string, () => boolean>();
    const work = h.options.work;
    h.options.work = (ready, s, park) => {
      parks.set(ready.lane.resourceKey, park);
      return work(ready, s, park);
    };
    const maxParked = PARKED_PER_SLOT * h.options.concurrency;
    // A platform each: a platform parks at most its share of the slots (one of two here), tried below.
    const ownPlatform = (n: number): ClaimedLane => ({
      lane: { platformCode: `PLAT${String(n).padStart(2, '0')}`, resourceKey: `trade:${n}` },
      heads: [],
    });
    for (let i = 1; i <= maxParked + 4; i++) h.due.push(ownPlatform(i));
    const dispatcher = startDispatcher(h.options);
    await until(() => h.working.size === 2, 'two lanes under way');
    const parked = new Set<string>();
    const active = () => [...h.working.keys()].filter((key) => !parked.has(key));
    for (let n = 1; n <= maxParked; n++) {
      const key = active()[0]!;
      assert.equal(parks.get(key)!(), true, `lane ${n} parked`);
      parked.add(key);
      await until(() => h.working.size === 2 + n, `a lane takes the slot freed by parked lane ${n}`);
    }
    assert.equal(parks.get([...parked][0]!)!(), true, 'a lane parked twice is parked once');
    const unparked = active()[0]!;
    assert.equal(parks.get(unparked)!(), false, 'past the bound, a lane keeps its slot');
    await tick();
    assert.equal(h.working.size, 2 + maxParked, 'no slot freed past the bound');
    // A parked lane that ends frees no slot (its own was freed when it was parked): the bound is not passed.
    h.working.get([...parked][0]!)!.resolve();
    await until(() => h.working.size === 1 + maxParked, 'the parked lane ended');
    await tick();
    assert.equal(active().length, 2, 'still two lanes in the slots');
    // A lane in a slot that ends frees it.
    h.working.get(unparked)!.resolve();
    await until(() => active().length === 2 && !h.working.has(unparked), 'the next lane takes the slot');
    const stopping = dispatcher.stop();
    for (const done of h.working.values()) done.resolve();
    await stopping;
  });

  test('a platform parks at most its share of the slots; a lane refused parking keeps its slot', async () => {
    const h = harness({ concurrency: 4 });
    const parks = new Map<string, () => boolean>();
    const work = h.options.work;
    h.options.work = (ready, s, park) => {
      parks.set(ready.lane.resourceKey, park);
      return work(ready, s, park);
    };
    for (let i = 1; i <= 6; i++) h.due.push(lane(i)); // all of PLAT01
    const dispatcher = startDispatcher(h.options);
    await until(() => h.working.size === 4, 'four lanes under way');
    assert.equal(parks.get('trade:1')!(), true);
    assert.equal(parks.get('trade:2')!(), true, 'two of four slots: its share');
    await until(() => h.working.size === 6, 'the freed slots taken');
    assert.equal(parks.get('trade:3')!(), false, 'a third of the same platform is refused');
    await tick();
    assert.equal(h.working.size, 6, 'no slot freed by the refusal');
    // One parked ends: the platform has room again.
    h.working.get('trade:1')!.resolve();
    await until(() => !h.working.has('trade:1'), 'the parked lane ended');
    assert.equal(parks.get('trade:3')!(), true, 'asked again, parked');
    const stopping = dispatcher.stop();
    for (const done of h.working.values()) done.resolve();
    await stopping;
  });

  describe('while receivers are slow', () => {
    /** Claims as webhook_claim_lanes does (0022): at most `capped.limit` lanes of the capped platforms. */
    function cappingHarness(concurrency: number, slow: Set<string>) {
      const h = harness({
        concurrency,
        pace: { isSlow: (p) => slow.has(p), anySlow: () => slow.size > 0, slowPlatforms: () => [...slow] },
      });
      const caps: (ClaimCap | null)[] = [];
      const excludedFromNextDue: string[][] = [];
      h.options.claim = async (limit, capped) => {
        h.claims.push(limit);
        caps.push(capped && { platforms: [...capped.platforms], limit: capped.limit });
        const taken: ClaimedLane[] = [];
        let cappedLeft = capped?.limit ?? 0;
        for (const l of [...h.due]) {
          if (taken.length >= limit) break;
          const isCapped = capped?.platforms.includes(l.lane.platformCode) ?? false;
          if (isCapped && cappedLeft-- <= 0) continue;
          taken.push(l);
          h.due.splice(h.due.indexOf(l), 1);
        }
        return taken;
      };
      h.options.nextDueInMs = async (excluded) => {
        excludedFromNextDue.push(excluded);
        return h.due.some((l) => !excluded.includes(l.lane.platformCode)) ? 0 : null;
      };
      // A lane given back is due again at once, as the release leaves it.
      h.options.release = async (lanes) => {
        h.released.push(...lanes.map((l) => l.lane.resourceKey));
        h.due.unshift(...lanes);
      };
      const running = (platform: string) =>
        [...h.working.keys()].filter((key) => key.startsWith(`trade:${platform}`)).length;
      return { ...h, caps, excludedFromNextDue, running };
    }
    const laneOf = (platformCode: string, n: number): ClaimedLane => ({
      lane: { platformCode, resourceKey: `trade:${platformCode}-${n}` },
      heads: [],
    });
    const slowLane = (n: number) => laneOf('SLOW01', n);
    const fastLane = (n: number) => laneOf('FAST01', n);

    test("their lanes hold at most half the slots while other platforms' lanes wait, and those pass theirs", async () => {
      const h = cappingHarness(4, new Set(['SLOW01']));
      // The slow platform's backlog fell due first.
      for (let i = 1; i <= 6; i++) h.due.push(slowLane(i));
      for (let i = 1; i <= 3; i++) h.due.push(fastLane(i));
      const dispatcher = startDispatcher(h.options);
      await until(() => h.working.size === 4, 'every slot taken');
      assert.equal(h.running('SLOW01'), 2, 'two slots (half) for the slow receiver');
      assert.equal(h.running('FAST01'), 2, 'the other two for the other platform');
      assert.deepEqual(
        h.caps[0],
        { platforms: ['SLOW01'], limit: 2 },
        'the claim took no more slow lanes than may start',
      );
      h.working.get('trade:FAST01-1')!.resolve();
      await until(
        () => h.working.has('trade:FAST01-3'),
        "the other platform's next lane takes the slot it freed",
      );
      assert.equal(h.running('SLOW01'), 2);
      h.working.get('trade:SLOW01-1')!.resolve();
      await until(() => h.running('SLOW01') === 1, 'a slow slot freed');
      dispatcher.wake(); // as the delivery does once the lane's release has landed
      await until(() => h.running('SLOW01') === 2, 'the next slow lane');
      assert.ok(h.working.has('trade:SLOW01-3'), 'oldest first');
      for (const key of ['trade:FAST01-2', 'trade:FAST01-3']) h.working.get(key)!.resolve();
      await until(() => h.running('FAST01') === 0, 'the other platform done');
      dispatcher.wake(); // as the delivery does once their releases have landed
      // The claim finds no other platform's lane: the slow lanes may take the free slots, all but one.
      await untilTimer(() => h.running('SLOW01') === 3, 'the slow lanes take the free slots');
      await tick();
      assert.equal(h.running('SLOW01'), 3, 'but not the last one');
      assert.deepEqual(
        h.excludedFromNextDue.at(-1),
        ['SLOW01'],
        'no wake-up for lanes a claim would not take',
      );
      // Another platform's lane comes: it takes the slot kept free.
      h.due.push(fastLane(4));
      dispatcher.wake();
      await until(() => h.working.has('trade:FAST01-4'), 'the new lane starts at once');
      const stopped = dispatcher.stop();
      for (const done of h.working.values()) done.resolve();
      await stopped;
    });

    test('with one slot, slow and other lanes take turns', async () => {
      const h = cappingHarness(1, new Set(['SLOW01']));
      const started: string[] = [];
      const work = h.options.work;
      h.options.work = (ready, signal, park) => {
        started.push(ready.lane.resourceKey);
        return work(ready, signal, park);
      };
      h.due.push(slowLane(1));
      const dispatcher = startDispatcher(h.options);
      await until(() => h.working.has('trade:SLOW01-1'), 'the slow lane takes the slot');
      // Meanwhile more of the slow backlog is due, and then another platform's lane.
      h.due.push(slowLane(2), fastLane(1));
      h.working.get('trade:SLOW01-1')!.resolve();
      await until(() => h.working.size === 0, 'the slot is free');
      dispatcher.wake(); // as the delivery does once the lane's release has landed
      await until(() => h.working.size === 1, 'the next lane');
      assert.deepEqual(started, ['trade:SLOW01-1', 'trade:FAST01-1'], 'the other platform has the next turn');
      h.working.get('trade:FAST01-1')!.resolve();
      await untilTimer(() => h.working.has('trade:SLOW01-2'), 'then the slow backlog again');
      const stopped = dispatcher.stop();
      for (const done of h.working.values()) done.resolve();
      await stopped;
    });

    test('the lanes in hand of a platform found slow after they were claimed are given back, past its slots', async () => {
      const slow = new Set<string>();
      const h = cappingHarness(2, slow);
      for (let i = 1; i <= 4; i++) h.due.push(slowLane(i));
      const dispatcher = startDispatcher(h.options);
      await until(() => h.running('SLOW01') === 2 && h.due.length === 0, 'both slots taken, two lanes ready');
      h.due.push(fastLane(1));
      // Its attempts ran past the threshold: the receiver is slow now.
      slow.add('SLOW01');
      h.working.get('trade:SLOW01-1')!.resolve();
      await until(() => h.working.has('trade:FAST01-1'), "the other platform's lane takes the freed slot");
      assert.deepEqual(
        h.released.sort(),
        ['trade:SLOW01-3', 'trade:SLOW01-4'],
        'the ready slow lanes were given back',
      );
      assert.equal(h.running('SLOW01'), 1, 'one slot (half of two) for the slow receiver');
      const stopped = dispatcher.stop();
      for (const done of h.working.values()) done.resolve();
      await stopped;
    });
  });
});
