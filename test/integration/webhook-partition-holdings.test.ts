import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { sql } from 'kysely';
import {
  createPartitionHoldings,
  type PartitionHoldings,
} from '../../src/domain/webhooks/partition-holdings.ts';
import { createStore } from '../../src/store/database.ts';
import { startTestService, type TestService } from '../helpers/test-service.ts';

/**
 * One worker's side of the partition leases (src/domain/webhooks/partition-holdings.ts), on the real statements and
 * without a worker around it: what it takes, gives back when another is short, lets go when lost, and how it answers
 * the reads and the attempts. Renewals are called directly (start() is not): no timer, no waiting.
 */
let svc: TestService;
before(async () => {
  svc = await startTestService();
});
after(() => svc?.close());

const LEASE_MS = 60_000;
const SLACK_MS = 2_000;
const silent = { warn() {}, info() {}, error() {} };
const ALL = Array.from({ length: 64 }, (_, i) => i);

interface Watched {
  holdings: PartitionHoldings;
  lost: number[];
  taken: number;
  /** Partitions that refuse to be dropped (lanes being worked). */
  busy: Set<number>;
}

function holdingsOf(owner: string): Watched {
  const watched: Watched = { lost: [], taken: 0, busy: new Set(), holdings: null! };
  watched.holdings = createPartitionHoldings({
    db: svc.runtime.store.db,
    owner,
    leaseMs: LEASE_MS,
    slackMs: SLACK_MS,
    logger: silent,
    drop: (partition) => !watched.busy.has(partition),
    onLost: (partition) => {
      watched.lost.push(partition);
      return 0;
    },
    onTaken: () => watched.taken++,
  });
  return watched;
}

/** As a worker stops: wants no more partitions, then gives back those it holds (so that it counts no more). */
async function stop({ holdings }: Watched): Promise<void> {
  holdings.stopWanting();
  await holdings.giveBackAll();
}

/** Loads every holding to load (as the reads do once its backlog is read). */
function loadAll({ holdings }: Watched): void {
  for (const holding of holdings.toLoad()) holdings.loaded(holding);
}

test('a worker alone takes every partition, to load; loaded ones are covered and fresh', async () => {
  const a = holdingsOf('holdings-alone');
  await a.holdings.renew();
  assert.equal(a.taken, 1, 'the reads are told once');
  assert.deepEqual(
    a.holdings.toLoad().map((h) => h.partition),
    ALL,
  );
  assert.deepEqual(a.holdings.covered(), [], 'nothing read yet');
  loadAll(a);
  assert.deepEqual(a.holdings.covered(), ALL);
  assert.equal(a.holdings.isCovered(5), true);
  assert.equal(a.holdings.fresh(5), true, 'just renewed');
  await stop(a);
  assert.equal(a.holdings.fresh(5), false, 'given back');
  assert.equal(a.holdings.isCovered(5), false);
  const { rows } = await sql<{ n: number }>`
    select count(*)::int as n from webhook_partitions where owner = 'holdings-alone'`.execute(
    svc.runtime.store.db,
  );
  assert.equal(rows[0]!.n, 0, 'none left held in the database');
});

test('one over its share gives back those not being worked when another is short; a holding given back and taken again is loaded afresh', async () => {
  const a = holdingsOf('holdings-A');
  const b = holdingsOf('holdings-B');
  await a.holdings.renew();
  loadAll(a);
  await b.holdings.renew();
  assert.deepEqual(b.holdings.toLoad(), [], 'none free yet');
  // A learns that B is short, and renews again at once (not a second later) to give back all over its share
  // but the partitions being worked.
  a.busy.add(0);
  await a.holdings.renew();
  await a.holdings.renew();
  const kept = a.holdings.covered();
  assert.equal(kept.length, 32, 'its fair share');
  assert.ok(kept.includes(0), 'the partition being worked is kept, another given back in its place');
  await b.holdings.renew();
  const bTook = b.holdings.toLoad().map((h) => h.partition);
  assert.equal(bTook.length, 32);
  assert.deepEqual(
    [...kept, ...bTook].sort((x, y) => x - y),
    ALL,
    'every partition held once',
  );
  assert.deepEqual(a.lost, [], 'given back is not lost');

  // A holding read before it was given back and taken again is a new holding: marking the old one loaded does nothing.
  const stale = b.holdings.toLoad()[0]!;
  await b.holdings.giveBackAll();
  await b.holdings.renew();
  b.holdings.loaded(stale);
  assert.equal(b.holdings.isCovered(stale.partition), false, 'the new holding is still to be read');
  await stop(a);
  await stop(b);
});

test('a partition whose lease another worker took is lost: its lanes stopped, dropped once they have, never covered again', async () => {
  const a = holdingsOf('holdings-lost');
  await a.holdings.renew();
  loadAll(a);
  a.busy.add(7);
  // The lease ran out and another worker took 7 and 8 (as webhook_lease_partitions does with an expired lease).
  await sql`update webhook_partitions set owner = 'holdings-other', lease_until = now() + interval '1 minute'
    where lane_partition in (7, 8)`.execute(svc.runtime.store.db);
  await a.holdings.renew();
  assert.deepEqual(a.lost.sort(), [7, 8]);
  assert.equal(a.holdings.fresh(7), false, 'no attempt starts on a lost partition');
  assert.equal(a.holdings.isCovered(8), false, 'reads no longer bring its notifications in');
  // The other worker gives them back; 7's lanes still run, so 7 is not loaded again until they stopped.
  await sql`update webhook_partitions set owner = null, lease_until = null
    where lane_partition in (7, 8)`.execute(svc.runtime.store.db);
  const takenBefore = a.taken;
  await a.holdings.renew();
  assert.deepEqual(
    a.holdings.toLoad().map((h) => h.partition),
    [8],
    '7 waits for its lanes to stop',
  );
  assert.equal(a.taken, takenBefore + 1);
  a.busy.delete(7);
  await a.holdings.renew();
  assert.deepEqual(
    a.holdings.toLoad().map((h) => h.partition),
    [7, 8],
    'dropped, then read afresh',
  );
  await stop(a);
});

test('partitions lost at once are logged in one line, with the lanes that were being worked', async () => {
  const warnings: Array<[object, string | undefined]> = [];
  const holdings = createPartitionHoldings({
    db: svc.runtime.store.db,
    owner: 'holdings-lost-together',
    leaseMs: LEASE_MS,
    slackMs: SLACK_MS,
    logger: { ...silent, warn: (fields: object, message?: string) => void warnings.push([fields, message]) },
    drop: () => true,
    onLost: () => 2,
    onTaken: () => {},
  });
  try {
    await holdings.renew();
    await sql`update webhook_partitions set owner = 'holdings-other', lease_until = now() + interval '1 minute'
      where lane_partition between 10 and 19`.execute(svc.runtime.store.db);
    await holdings.renew();
    // Before: a line each, 64 at once after a worker was frozen past its leases (probe).
    assert.deepEqual(warnings, [
      [
        { partitions: [10, 11, 12, 13, 14, 15, 16, 17, 18, 19], lanes: 20, owner: 'holdings-lost-together' },
        'webhook partition leases lost; their lanes are left to their holders',
      ],
    ]);
  } finally {
    holdings.stopWanting();
    await holdings.giveBackAll();
    await sql`update webhook_partitions set owner = null, lease_until = null
      where owner = 'holdings-other'`.execute(svc.runtime.store.db);
  }
});

test('stopping: a worker that wants no more partitions keeps those it holds until it gives them back, then another takes them all', async () => {
  const a = holdingsOf('holdings-stopping');
  const b = holdingsOf('holdings-next');
  await a.holdings.renew();
  loadAll(a);
  a.holdings.stopWanting();
  await a.holdings.renew();
  assert.equal(a.holdings.covered().length, 64, 'its attempts under way still have their leases');
  assert.equal(a.holdings.fresh(3), true);
  await b.holdings.renew();
  assert.deepEqual(b.holdings.toLoad(), [], 'none free while the stopping worker holds them');
  // A renewal under way as the stop gives back (the timer's) does not keep them.
  void a.holdings.renew();
  await a.holdings.giveBackAll();
  await b.holdings.renew();
  assert.equal(b.holdings.toLoad().length, 64, 'given back at once, not left to expire');
  await stop(b);
});

test('while renewals fail (the database away), an attempt waits for the next renewal rather than asking for its own', async () => {
  // Each lane's attempt asked for a renewal of its own, which failed at once: lanes stopped and were claimed again
  // in a loop, 20,000 log lines a second and a core for as long as the database was away (review, session 31).
  const away = createStore('postgres://postgres@127.0.0.1:1/none', { max: 1 });
  let statements = 0;
  const counted = away.db.withPlugin({
    transformQuery: ({ node }) => {
      statements++;
      return node;
    },
    transformResult: async ({ result }) => result,
  });
  const holdings = createPartitionHoldings({
    db: counted,
    owner: 'holdings-away',
    leaseMs: LEASE_MS,
    slackMs: SLACK_MS,
    logger: silent,
    drop: () => true,
    onLost: () => 0,
    onTaken: () => {},
  });
  try {
    await holdings.renew();
    assert.equal(statements, 1, 'the renewal was tried');
    // Three lanes' attempts: none sends a renewal; they wait for the next one (the timer's, made here).
    const attempts = Promise.all([holdings.renewFresh(), holdings.renewFresh(), holdings.renewFresh()]);
    await holdings.renew();
    await attempts;
    assert.equal(statements, 2, 'one renewal more, the scheduled one');
    assert.equal(holdings.fresh(0), false);
  } finally {
    await away.close();
  }
});

test('a worker short of its share before its database went away tells the others again when it is back', async () => {
  const a = holdingsOf('return-A');
  await a.holdings.renew();
  let away = false;
  const flaky = svc.runtime.store.db.withPlugin({
    transformQuery: ({ node }) => {
      if (away) throw new Error('database away');
      return node;
    },
    transformResult: async ({ result }) => result,
  });
  const c = createPartitionHoldings({
    db: flaky,
    owner: 'return-C',
    leaseMs: LEASE_MS,
    slackMs: SLACK_MS,
    logger: silent,
    drop: () => true,
    onLost: () => 0,
    onTaken: () => {},
  });
  const listener = await svc.runtime.store.pool.connect();
  let told = 0;
  listener.on('notification', (n) => {
    if (n.channel === 'svc_webhooks' && n.payload === 'partitions') told++;
  });
  await listener.query('listen svc_webhooks');
  // Each NOTIFY reaches the listener before the answer to its next statement.
  const toldNow = async () => (await listener.query('select 1'), told);
  try {
    await c.renew();
    assert.equal(await toldNow(), 1, 'short of its share (A holds all): the others are told');
    await c.renew();
    assert.equal(await toldNow(), 1, 'still short: not told again');
    away = true;
    await c.renew();
    away = false;
    await c.renew();
    assert.equal(await toldNow(), 2, 'back and still short: told again, not left to their next renewal');
  } finally {
    await listener.query('unlisten svc_webhooks');
    listener.release();
    await stop(a);
    c.stopWanting();
    await c.giveBackAll();
  }
});
