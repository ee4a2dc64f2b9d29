import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { sql } from 'kysely';
import { recordNotification } from '../../src/domain/webhooks/outbox.ts';
import {
  claimLanes,
  listAttempts,
  nextLaneDueInMs,
  releaseLanes,
  settleLanes,
} from '../../src/domain/webhooks/webhooks.repository.ts';
import { startTestService, type TestService } from '../helpers/test-service.ts';
import { record } from '../helpers/webhook-receiver.ts';

/**
 * The lane statements of migration 0008 on their own (no worker runs here): what a claim takes, what a
 * release leaves behind, and that a notification recorded while its lane is being given back is never left
 * without a due lane.
 */
let svc: TestService;
before(async () => {
  svc = await startTestService();
});
after(() => svc?.close());

const db = () => svc.runtime.store.db;
// Long: no lane an earlier test claimed may fall due again while the file runs, since the claims below that
// check exact shares count every platform's due lanes (the tests that need a lease expired set its time).
const LEASE_MS = 3_600_000;
const claim = (owner: string, limit = 100, perLane = 20) =>
  claimLanes(db(), owner, { limit, leaseMs: LEASE_MS, perLane });

async function lanes(code: string) {
  const r = await sql<{ resource_key: string; owner: string | null; due_now: boolean }>`
    select resource_key, owner, due_at <= clock_timestamp() as due_now from webhook_lanes
    where platform_code = ${code} order by resource_key`.execute(db());
  return r.rows;
}

async function newPlatformWithWebhook(): Promise<string> {
  const { platform } = await svc.newPlatform();
  await svc.admin.put(`/platforms/${platform.platform_code}/webhook`, { url: 'http://127.0.0.1:9/unused' });
  return platform.platform_code;
}

/** `n` new platforms with a webhook each. */
async function newPlatforms(n: number): Promise<string[]> {
  const codes: string[] = [];
  for (let i = 0; i < n; i++) codes.push(await newPlatformWithWebhook());
  return codes;
}

/** Other tests' lanes are claimed too (one database): keep only this platform's. */
const mine = (code: string, claimed: Awaited<ReturnType<typeof claim>>) =>
  claimed.filter((c) => c.lane.platformCode === code);

test('a claim takes due lanes nobody holds, with their oldest notifications in order', async () => {
  const code = await newPlatformWithWebhook();
  const a1 = await record(db(), code, 'trade:A', { n: 1 });
  const a2 = await record(db(), code, 'trade:A', { n: 2 });
  const a3 = await record(db(), code, 'trade:A', { n: 3 });
  await record(db(), code, 'trade:B');
  await record(db(), code, 'trade:C');
  // C waits for a retry an hour away: its lane is due then, not now.
  await sql`update webhook_notifications set status = 'retrying', next_attempt_at = now() + interval '1 hour'
    where platform_code = ${code} and resource_key = 'trade:C'`.execute(db());
  await sql`update webhook_lanes set due_at = now() + interval '1 hour'
    where platform_code = ${code} and resource_key = 'trade:C'`.execute(db());

  const first = mine(code, await claim('worker-1', 100, 2));
  assert.deepEqual(
    first.map((c) => c.lane.resourceKey),
    ['trade:A', 'trade:B'],
  );
  assert.deepEqual(
    first[0]!.heads.map((h) => h.notification_id),
    [a1, a2],
    'A: its two oldest, in order (perLane 2)',
  );
  assert.ok(first[0]!.heads.every((h) => h.due && h.url === 'http://127.0.0.1:9/unused'));
  assert.deepEqual(await lanes(code), [
    { resource_key: 'trade:A', owner: 'worker-1', due_now: false },
    { resource_key: 'trade:B', owner: 'worker-1', due_now: false },
    { resource_key: 'trade:C', owner: null, due_now: false },
  ]);
  assert.deepEqual(mine(code, await claim('worker-2')), [], 'held lanes and C are not claimed again');

  // Giving them back: A still has a3, due now; B is empty and goes.
  await sql`update webhook_notifications set status = 'delivered'
    where notification_id in (${a1}::uuid, ${a2}::uuid) or (platform_code = ${code} and resource_key = 'trade:B')`.execute(
    db(),
  );
  await releaseLanes(
    db(),
    'worker-1',
    first.map((c) => c.lane),
  );
  assert.deepEqual(await lanes(code), [
    { resource_key: 'trade:A', owner: null, due_now: true },
    { resource_key: 'trade:C', owner: null, due_now: false },
  ]);
  const again = mine(code, await claim('worker-2'));
  assert.deepEqual(
    again.map((c) => [c.lane.resourceKey, c.heads.map((h) => h.notification_id)]),
    [['trade:A', [a3]]],
  );
});

/** Records a notification on each lane, and makes the lane due that many seconds ago. */
async function recordDue(due: readonly (readonly [code: string, resource: string, secondsAgo: number])[]) {
  for (const [code, resource, secondsAgo] of due) {
    await record(db(), code, resource);
    await sql`update webhook_lanes set due_at = clock_timestamp() - ${secondsAgo} * interval '1 second'
      where platform_code = ${code} and resource_key = ${resource}`.execute(db());
  }
}

test('a claim returns its lanes in the order they fell due, not by platform or resource', async () => {
  // `early` sorts before `late`, and trade:A before trade:B: by key, the last lane due would come first.
  const [early, late] = (await newPlatforms(2)).sort();
  const due = [
    [late, 'trade:B', 3],
    [early, 'trade:A', 2],
    [late, 'trade:A', 1],
  ] as const;
  await recordDue(due);
  const claimed = (await claim('worker-due-order')).filter(
    (c) => c.lane.platformCode === early || c.lane.platformCode === late,
  );
  assert.deepEqual(
    claimed.map((c) => [c.lane.platformCode, c.lane.resourceKey]),
    due.map(([code, resource]) => [code, resource]),
  );
  assert.ok(claimed.every((c) => c.heads.length === 1));
});

test('a claim gives each platform with due lanes an equal share, its oldest first, and returns the platforms in turn (0024)', async () => {
  const [busy, some, one] = (await newPlatforms(3)) as [string, string, string];
  await recordDue([
    [busy, 'trade:B1', 9],
    [busy, 'trade:B2', 8],
    [busy, 'trade:B3', 7],
    [busy, 'trade:B4', 6],
    [busy, 'trade:B5', 5],
    [some, 'trade:S1', 4],
    [some, 'trade:S2', 3],
    [one, 'trade:O1', 2],
  ]);
  const ofThese = (claimed: Awaited<ReturnType<typeof claim>>) =>
    claimed.filter((c) => [busy, some, one].includes(c.lane.platformCode)).map((c) => c.lane.resourceKey);
  // Six among three: two each, but `one` has a single lane, and what it leaves goes to `busy`, the only one
  // with more. By due order alone the busy platform would have taken five of the six.
  assert.deepEqual(ofThese(await claim('worker-shares', 6)), [
    'trade:B1',
    'trade:S1',
    'trade:O1',
    'trade:B2',
    'trade:S2',
    'trade:B3',
  ]);
  assert.deepEqual(ofThese(await claim('worker-shares-rest', 6)), ['trade:B4', 'trade:B5']);
});

test('shares are equal within one claim, what a platform leaves shared among the others alike (0024)', async () => {
  const lanesOf = (code: string, n: number) =>
    Array.from({ length: n }, (_, i) => [code, `trade:${i}`, n - i] as const);
  const perPlatform = async (owner: string, limit: number, platforms: string[]) => {
    const claimed = await claim(owner, limit);
    await claim(`${owner}-rest`); // (so that the next claims find none of these lanes due)
    return platforms
      .map((code) => claimed.filter((c) => c.lane.platformCode === code).length)
      .sort((a, b) => a - b);
  };

  const four = await newPlatforms(4);
  await recordDue(four.flatMap((code) => lanesOf(code, 3)));
  // 9 among 4: 3, 2, 2, 2. A share of 3 (9 / 4, rounded up) for each in turn left the last platform none.
  assert.deepEqual(await perPlatform('worker-equal', 9, four), [2, 2, 2, 3]);

  const [single, ...big] = await newPlatforms(4);
  await recordDue([...lanesOf(single!, 1), ...big.flatMap((code) => lanesOf(code, 40))]);
  // 61 among 4, one of which has a single lane: what it leaves of its 15 goes to the three others alike, 20
  // each. Shared only among the platforms served after it in the round, those served before it got 16 and
  // those after 22.
  assert.deepEqual(await perPlatform('worker-leftover', 61, [single!, ...big]), [1, 20, 20, 20]);
});

test("a claim of fewer lanes than there are platforms does not always take the oldest backlog's (0024)", async () => {
  const [busy, other] = (await newPlatforms(2)) as [string, string];
  await recordDue([
    ...Array.from({ length: 40 }, (_, i) => [busy, `trade:B${i}`, 100 - i] as const),
    [other, 'trade:O1', 1],
  ]);
  // In due order, each claim of one lane took the busy platform's oldest, 40 claims before the other's lane.
  // Each claim now picks either platform alike: the other's lane is left after 30 claims with a chance of
  // one in 2^30.
  let claims = 0;
  for (; claims < 30; claims++) {
    const claimed = await claim('worker-one-lane', 1);
    if (claimed.some((c) => c.lane.platformCode === other)) break;
  }
  assert.ok(claims < 30, "the other platform's lane was claimed within 30 claims of one lane");
  await claim('worker-one-lane-rest'); // (so that the next test's claims find none of these lanes due)
});

test("a claim takes at most its share of the slow platforms' lanes, in due order with the others' (0022)", async () => {
  const [slow, other] = (await newPlatforms(2)) as [string, string];
  const due = [
    [slow, 'trade:S1', 5],
    [slow, 'trade:S2', 4],
    [other, 'trade:O1', 3],
    [slow, 'trade:S3', 2],
    [other, 'trade:O2', 1],
  ] as const;
  await recordDue(due);
  const claimCapped = (owner: string, limit: number) =>
    claimLanes(db(), owner, {
      limit: 100,
      leaseMs: LEASE_MS,
      perLane: 20,
      capped: { platforms: [slow], limit },
    });
  const ofBoth = (claimed: Awaited<ReturnType<typeof claim>>) =>
    claimed
      .filter((c) => c.lane.platformCode === slow || c.lane.platformCode === other)
      .map((c) => c.lane.resourceKey);
  assert.deepEqual(ofBoth(await claimCapped('worker-capped', 1)), ['trade:S1', 'trade:O1', 'trade:O2']);
  assert.deepEqual(
    (await lanes(slow)).map((l) => [l.resource_key, l.owner, l.due_now]),
    [
      ['trade:S1', 'worker-capped', false],
      ['trade:S2', null, true],
      ['trade:S3', null, true],
    ],
    "the slow platform's other lanes are left due, for a worker with room",
  );
  assert.deepEqual(ofBoth(await claimCapped('worker-capped-none', 0)), [], 'a share of none takes none');
  const small = await claimLanes(db(), 'worker-small', {
    limit: 1,
    leaseMs: LEASE_MS,
    perLane: 20,
    capped: { platforms: [slow], limit: 5 },
  });
  assert.deepEqual(
    small.map((c) => c.lane.resourceKey),
    ['trade:S2'],
    "a share larger than the claim's limit takes no more than the limit",
  );
  assert.deepEqual(ofBoth(await claim('worker-uncapped')), ['trade:S3']);
});

test('a release by someone who no longer holds the lane changes nothing; an expired lease is claimed again', async () => {
  const code = await newPlatformWithWebhook();
  await record(db(), code, 'trade:L');
  assert.equal(mine(code, await claim('worker-1')).length, 1);
  await releaseLanes(db(), 'worker-2', [{ platformCode: code, resourceKey: 'trade:L' }]);
  assert.deepEqual(await lanes(code), [{ resource_key: 'trade:L', owner: 'worker-1', due_now: false }]);

  // worker-1 died: once its lease has expired (time moved on) the lane is due and another worker takes it.
  await sql`update webhook_lanes set due_at = clock_timestamp() - interval '1 millisecond'
    where platform_code = ${code}`.execute(db());
  const taken = mine(code, await claim('worker-2'));
  assert.equal(taken.length, 1);
  assert.equal(taken[0]!.heads.length, 1);
  assert.deepEqual(await lanes(code), [{ resource_key: 'trade:L', owner: 'worker-2', due_now: false }]);
});

test('a notification recorded while its lane is given back is never left without a due lane', async () => {
  const code = await newPlatformWithWebhook();
  const lane = { platformCode: code, resourceKey: 'trade:R' };
  const first = await record(db(), code, lane.resourceKey);
  assert.equal(mine(code, await claim('worker-1')).length, 1);
  await sql`update webhook_notifications set status = 'delivered' where notification_id = ${first}::uuid`.execute(
    db(),
  );

  // A producer records into the held lane and has not committed yet when the worker gives the lane back.
  let commit!: () => void;
  const mayCommit = new Promise<void>((resolve) => (commit = resolve));
  let recorded!: () => void;
  const hasRecorded = new Promise<void>((resolve) => (recorded = resolve));
  const producer = db()
    .transaction()
    .execute(async (trx) => {
      const id = await recordNotification(trx, {
        platformCode: code,
        payloadType: 'trade_status_changed',
        resourceKey: lane.resourceKey,
        payload: { second: true },
      });
      recorded();
      await mayCommit;
      return id;
    });
  await hasRecorded;
  // The release must not wait for the producer, nor delete the lane it is recording into.
  await releaseLanes(db(), 'worker-1', [lane]);
  assert.deepEqual(await lanes(code), [{ resource_key: 'trade:R', owner: null, due_now: true }]);
  commit();
  const second = await producer;
  const claimed = mine(code, await claim('worker-2'));
  assert.deepEqual(
    claimed.map((c) => c.heads.map((h) => h.notification_id)),
    [[second]],
  );

  // And the other way round: released (empty) first, recorded after: the lane row comes back, due.
  await sql`update webhook_notifications set status = 'delivered' where notification_id = ${second}::uuid`.execute(
    db(),
  );
  await releaseLanes(db(), 'worker-2', [lane]);
  assert.deepEqual(await lanes(code), []);
  await record(db(), code, lane.resourceKey);
  assert.deepEqual(await lanes(code), [{ resource_key: 'trade:R', owner: null, due_now: true }]);
});

test('a rolled-back notification leaves no lane', async () => {
  const code = await newPlatformWithWebhook();
  await db()
    .transaction()
    .execute(async (trx) => {
      await recordNotification(trx, {
        platformCode: code,
        payloadType: 'trade_status_changed',
        resourceKey: 'trade:RB',
        payload: {},
      });
      throw new Error('roll back');
    })
    .catch(() => {});
  assert.deepEqual(await lanes(code), []);
});

test('the next due time: null with no lane at all (not "due now"), else the earliest lane', async () => {
  // In a transaction rolled back at the end, so the other tests' lanes can be set aside.
  const rollback = new Error('roll back');
  await db()
    .transaction()
    .execute(async (trx) => {
      await sql`delete from webhook_lanes`.execute(trx);
      assert.equal(await nextLaneDueInMs(trx), null, 'an idle dispatcher sleeps until woken or polled');
      const code = await newPlatformWithWebhook();
      await sql`insert into webhook_lanes (platform_code, resource_key, due_at)
        values (${code}, 'trade:LATER', clock_timestamp() + interval '1 hour'),
               (${code}, 'trade:SOON', clock_timestamp() + interval '90 seconds')`.execute(trx);
      const ms = await nextLaneDueInMs(trx);
      assert.ok(ms !== null && ms > 85_000 && ms <= 90_000, `due in about 90 s, got ${ms}`);
      await sql`update webhook_lanes set due_at = clock_timestamp() - interval '1 second'
        where resource_key = 'trade:LATER'`.execute(trx);
      assert.equal(await nextLaneDueInMs(trx), 0, 'a lane already due is due now');
      const ignoring = await nextLaneDueInMs(trx, [code]);
      assert.equal(
        ignoring,
        null,
        "the lanes of a platform excluded (a slow receiver's, while its slots are full) are not looked at",
      );
      const other = await newPlatformWithWebhook();
      await sql`insert into webhook_lanes (platform_code, resource_key, due_at)
        values (${other}, 'trade:OTHER', clock_timestamp() + interval '90 seconds')`.execute(trx);
      const others = await nextLaneDueInMs(trx, [code]);
      assert.ok(
        others !== null && others > 85_000 && others <= 90_000,
        `the others' next lane, got ${others}`,
      );
      throw rollback;
    })
    .catch((err: unknown) => {
      if (err !== rollback) throw err;
    });
});

test('every attempt is listed in order: those recorded before migration 0011, the earlier ones kept with the notification, the latest', async () => {
  const code = await newPlatformWithWebhook();
  const id = await record(db(), code, 'trade:attempts');
  // Two attempts recorded by a version before 0011, as rows of their own.
  await sql`insert into webhook_attempts_before_0011
      (notification_id, attempt_number, started_at, duration_ms, status_code, error, outcome, worker)
    values (${id}, 1, now() - interval '2 minutes', 5, 500, 'HTTP 500', 'failed', 'old:1'),
           (${id}, 2, now() - interval '1 minute', 6, 502, 'HTTP 502', 'failed', 'old:1')`.execute(db());
  await sql`update webhook_notifications set attempt_count = 2, status = 'retrying'
    where notification_id = ${id}`.execute(db());

  const attemptOnce = async (outcome: 'failed' | 'delivered', statusCode: number) => {
    const [claimed] = mine(code, await claim('worker-attempts'));
    const head = claimed!.heads[0]!;
    assert.equal(head.notification_id, id);
    const [settled] = await settleLanes(db(), 'worker-attempts', LEASE_MS, [
      {
        lane: claimed!.lane,
        renew: false,
        release: true,
        result: {
          head,
          newStateToken: crypto.randomUUID(),
          record: {
            attempt: { startedAt: new Date(), durationMs: 7, statusCode, error: null, outcome },
            status: outcome === 'delivered' ? 'delivered' : 'retrying',
            statusReason: null,
            roundAttempts: 0,
            nextAttemptInMs: outcome === 'delivered' ? null : 0,
          },
        },
      },
    ]);
    assert.equal(settled!.applied, true);
  };
  await attemptOnce('failed', 503);
  await attemptOnce('delivered', 204);

  const listed = await listAttempts(db(), [id]);
  assert.deepEqual(
    listed.map((a) => [a.attempt_number, a.status_code, a.outcome, a.worker]),
    [
      [1, 500, 'failed', 'old:1'],
      [2, 502, 'failed', 'old:1'],
      [3, 503, 'failed', 'worker-attempts'],
      [4, 204, 'delivered', 'worker-attempts'],
    ],
  );
  assert.ok(listed.every((a) => a.started_at instanceof Date && a.duration_ms >= 0));
  // The latest attempt is on the row; the one before it joined earlier_attempts; no new attempt rows.
  const row = await sql<{ earlier: number; legacy: number }>`
    select jsonb_array_length(earlier_attempts) as earlier,
      (select count(*)::int from webhook_attempts_before_0011 where notification_id = ${id}) as legacy
    from webhook_notifications where notification_id = ${id}`.execute(db());
  assert.deepEqual(row.rows[0], { earlier: 1, legacy: 2 });
});

test('a settle sent again after it committed (its answer lost) records its attempt once and answers it as applied (0025)', async () => {
  // The batcher sends a failed settle statement's items again, each alone; a statement that had committed before
  // its connection dropped recorded its attempts a second time.
  const code = await newPlatformWithWebhook();
  const id = await record(db(), code, 'trade:replayed');
  const [claimed] = mine(code, await claim('worker-replay'));
  const head = claimed!.heads[0]!;
  const item = {
    lane: claimed!.lane,
    renew: false,
    release: false,
    result: {
      head,
      newStateToken: crypto.randomUUID(),
      record: {
        attempt: {
          startedAt: new Date(),
          durationMs: 7,
          statusCode: 503,
          error: 'HTTP 503',
          outcome: 'failed' as const,
        },
        status: 'retrying' as const,
        statusReason: 'HTTP 503',
        roundAttempts: 1,
        nextAttemptInMs: 250,
      },
    },
  };
  const first = await settleLanes(db(), 'worker-replay', LEASE_MS, [item]);
  const again = await settleLanes(db(), 'worker-replay', LEASE_MS, [item]);
  assert.deepEqual(first, [{ leaseHeld: true, applied: true }]);
  assert.deepEqual(again, [{ leaseHeld: true, applied: true }], 'the same answer: the record is there');
  const listed = await listAttempts(db(), [id]);
  assert.deepEqual(
    listed.map((a) => [a.attempt_number, a.status_code, a.outcome]),
    [[1, 503, 'failed']],
    'one attempt',
  );
  const row = await sql<{
    attempt_count: number;
    status: string;
    round_attempts: number;
    state_token: string;
  }>`
    select attempt_count, status, round_attempts, state_token::text from webhook_notifications
    where notification_id = ${id}`.execute(db());
  assert.deepEqual(row.rows[0], {
    attempt_count: 1,
    status: 'retrying',
    round_attempts: 1,
    state_token: item.result.newStateToken,
  });
  await releaseLanes(db(), 'worker-replay', [claimed!.lane]);
});
