import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { createBookReads, type BookReads } from '../../src/domain/webhooks/book-reads.ts';
import type { Lane } from '../../src/domain/webhooks/delivery-lane.ts';
import { createLaneBook, type LaneBook } from '../../src/domain/webhooks/lane-book.ts';
import type { ReadNotification } from '../../src/domain/webhooks/lane-reads.repository.ts';
import {
  createPartitionHoldings,
  type PartitionHoldings,
} from '../../src/domain/webhooks/partition-holdings.ts';
import type { Log } from '../../src/lib/log.ts';
import { createStore, type Db } from '../../src/store/database.ts';
import { holdingQueries } from '../helpers/held-queries.ts';
import { startTcpProxy } from '../helpers/tcp-proxy.ts';
import { startTestService, type TestService } from '../helpers/test-service.ts';
import { record, waitFor } from '../helpers/webhook-receiver.ts';

/**
 * What keeps a worker's lane book filled (src/domain/webhooks/book-reads.ts), on the real statements and without a
 * worker around it: the backlog of the partitions it holds, what is recorded later, each platform's endpoint, and a
 * platform paused until a read begun after the pause has landed.
 */
let svc: TestService;
let holdings: PartitionHoldings;
before(async () => {
  svc = await startTestService();
});
after(async () => {
  holdings?.stopWanting();
  await holdings?.giveBackAll();
  await svc?.close();
});

const silent = { warn() {}, info() {}, error() {} };

interface Reading {
  reads: BookReads;
  book: LaneBook<ReadNotification>;
  reordered: Lane[];
  /** Times the dispatcher would have been woken (something taken in). */
  onReads: number;
}

function reading(options: { db?: Db; logger?: Log; readRetryMs?: number } = {}): Reading {
  const book = createLaneBook<ReadNotification>({ headsPerLane: 20, maxHeadsPerLane: 40 });
  const reordered: Lane[] = [];
  holdings = createPartitionHoldings({
    db: svc.runtime.store.db,
    owner: 'book-reads-test',
    leaseMs: 60_000,
    slackMs: 2_000,
    logger: silent,
    drop: (partition) => book.dropPartition(partition),
    onLost: () => 0,
    onTaken: () => reads.read(),
  });
  const reads = createBookReads({
    db: options.db ?? svc.runtime.store.db,
    book,
    holdings,
    maxHeadsPerLane: 40,
    maxHeld: 1_000,
    logger: options.logger ?? silent,
    readRetryMs: options.readRetryMs,
    onReordered: (lanes) => reordered.push(...lanes),
    onRead: () => result.onReads++,
    onEndpointsChanged: () => {},
  });
  const result: Reading = { reads, book, reordered, onReads: 0 };
  return result;
}

async function newPlatformWithWebhook(url: string): Promise<string> {
  const { platform } = await svc.newPlatform();
  await svc.admin.put(`/platforms/${platform.platform_code}/webhook`, { url });
  return platform.platform_code;
}

/** The ids the book holds of `code`, lane by lane, by claiming every lane due. */
function claimedIds(book: LaneBook<ReadNotification>, code: string): string[] {
  const claims = book.claim(1_000);
  for (const claim of claims) book.release(claim.lane);
  return claims
    .filter((claim) => claim.lane.platformCode === code)
    .flatMap((claim) => claim.heads.map((head) => head.notification_id));
}

test('the backlog of the partitions taken, then what is recorded later, with each platform endpoint; a paused platform waits for a read begun after the pause', async () => {
  const code = await newPlatformWithWebhook('http://127.0.0.1:9/book-reads');
  const before = await record(svc.runtime.store.db, code, 'trade:backlog');
  const r = reading();
  // The partitions taken: their backlogs are read (onTaken), a few partitions a statement.
  await holdings.renew();
  await waitFor(() => holdings.covered().length === 64, 'every partition loaded');
  assert.equal(
    r.reads.endpointOf(code)?.url,
    'http://127.0.0.1:9/book-reads',
    'read before its notifications',
  );
  assert.deepEqual(claimedIds(r.book, code), [before]);

  // Recorded later: the next read after the cursor brings it.
  const later = await record(svc.runtime.store.db, code, 'trade:later');
  const wakes = r.onReads;
  r.reads.read();
  await waitFor(() => claimedIds(r.book, code).includes(later), 'the later notification read');
  await waitFor(() => r.onReads > wakes, 'the dispatcher woken');

  // Paused until a read started after the pause has landed; the endpoint is read again with it.
  await svc.admin.put(`/platforms/${code}/webhook`, { url: 'http://127.0.0.1:9/moved' });
  r.reads.platformChanged(code);
  assert.ok(r.reads.paused().platforms?.has(code), 'paused at once');
  assert.equal(r.reads.paused().all, false);
  assert.equal(r.reads.endpointOf(code)?.url, 'http://127.0.0.1:9/book-reads', 'not read again yet');
  await waitFor(() => r.reads.paused().platforms === undefined, 'the read begun after the change landed');
  assert.equal(r.reads.endpointOf(code)?.url, 'http://127.0.0.1:9/moved', 'read again before the pause ends');

  // Every platform (the LISTEN connection lost): nothing is claimable until a read lands.
  r.reads.platformChanged(null);
  assert.equal(r.reads.paused().all, true);
  await waitFor(() => !r.reads.paused().all, 'a read begun after the loss landed');

  await r.reads.stop();
  r.reads.read();
  assert.equal(r.reordered.length, 0, 'nothing committed late here');
});

test('while the database is away, reads wait for the retry whoever asks for one, and the outage is logged once, then its end', async () => {
  holdings?.stopWanting();
  await holdings?.giveBackAll();
  const proxy = await startTcpProxy(svc.database.url);
  const store = createStore(proxy.url);
  const lines: Array<{ level: string; message: string; fields: Record<string, unknown> }> = [];
  const capture = (level: string) => (fields: object, message?: string) =>
    void lines.push({ level, message: message ?? '', fields: fields as Record<string, unknown> });
  const logger: Log = { info: capture('info'), warn: capture('warn'), error: capture('error') };
  const retryMs = 100;
  const r = reading({ db: store.db, logger, readRetryMs: retryMs });
  try {
    await holdings.renew();
    await waitFor(() => holdings.covered().length === 64, 'every partition loaded');
    await proxy.down();
    // Everything that asks for a read during the outage (wake-ups, the poll, the slots): every 2 ms for 600 ms.
    const started = performance.now();
    while (performance.now() - started < 600) {
      r.reads.read();
      await new Promise((resolve) => setTimeout(resolve, 2));
    }
    const outageMs = performance.now() - started;
    await proxy.up();
    const recovered = await waitFor(
      () => lines.find((line) => line.message === 'webhook notifications read again'),
      'the reads back',
    );
    const errors = lines.filter((line) => line.level === 'error');
    assert.deepEqual(
      errors.map((line) => line.message),
      ['webhook notifications not read; trying again'],
      'the outage logged once',
    );
    // One read, then one per retry: without the wait, each of the ~300 asks started a read of its own.
    const failures = recovered.fields.failures as number;
    assert.ok(
      failures >= 1 && failures <= outageMs / retryMs + 3,
      `${failures} failed reads in ${outageMs} ms`,
    );
  } finally {
    await r.reads.stop();
    await store.close();
    await proxy.close();
  }
});

test('a read asked for while the reads are stopping is not made: the pass under way is the last', async () => {
  holdings?.stopWanting();
  await holdings?.giveBackAll();
  // Every statement of the reads is held until released: a pass is under way, its first statement answered late.
  const held = holdingQueries(svc.runtime.store.db, () => true);
  const r = reading({ db: held.db });
  r.reads.platformChanged('HELD01'); // a pass that begins with a statement (that platform's endpoint read again)
  await held.reached;
  assert.equal(r.onReads, 0, 'the pass has not landed');
  // Asked for during the pass (a wake-up, the poll): queued, to be made once it ends.
  r.reads.read();
  const stopping = r.reads.stop();
  held.release();
  await stopping;
  assert.equal(r.onReads, 1, 'the pass under way landed, and no pass began after the stop');
});

test('a failed read of a changed endpoint is read again by the retry: the platform is not unpaused with the old one', async () => {
  holdings?.stopWanting();
  await holdings?.giveBackAll();
  const code = await newPlatformWithWebhook('http://127.0.0.1:9/before');
  await record(svc.runtime.store.db, code, 'trade:endpoint-retry');
  // The next read of the endpoints fails (its answer lost).
  let failNext = false;
  const db = svc.runtime.store.db.withPlugin({
    transformQuery: ({ node }) => node,
    transformResult: async ({ result }) => {
      if (failNext && JSON.stringify(result.rows[0] ?? {}).includes('sealed_secret')) {
        failNext = false;
        throw new Error('the endpoints read failed');
      }
      return result;
    },
  });
  const r = reading({ db, readRetryMs: 20 });
  try {
    await holdings.renew();
    await waitFor(() => r.reads.endpointOf(code)?.url === 'http://127.0.0.1:9/before', 'the endpoint read');
    await svc.admin.put(`/platforms/${code}/webhook`, { url: 'http://127.0.0.1:9/after' });
    failNext = true;
    r.reads.platformChanged(code);
    await waitFor(
      () => r.reads.endpointOf(code)?.url === 'http://127.0.0.1:9/after',
      'the new one, read by the retry',
    );
    assert.equal(failNext, false, 'the read did fail once');
    // Unpaused when the pass that read it lands (a moment after the endpoint is in the map).
    await waitFor(() => r.reads.paused().platforms === undefined, 'unpaused once it is read');
  } finally {
    await r.reads.stop();
  }
});
