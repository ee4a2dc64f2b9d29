/**
 * The CPU of the lane book's share of a delivery (src/domain/webhooks/lane-book.ts: a read's rows taken in, a claim,
 * the record settled, the lane released), one notification per lane as in bench/webhooks.bench.ts's worst shape:
 * 1. for a worker that has just started against one that has run for a while (RETIRED notifications delivered
 *    before): a worker runs for days, and what the book costs must not grow with what it has done;
 * 2. for a platform with LARGE_BACKLOG lanes due at once (a receiver back after an outage) against one with
 *    SMALL_BACKLOG: what a lane costs must not grow with how many wait;
 * 3. the next due time with a platform excluded (its receiver slow) and LARGE_BACKLOG of its lanes waiting for a
 *    retry, against SMALL_BACKLOG.
 * Each pair in the same process, alternately, BENCH_ROUNDS (5) rounds; prints µs per delivery and the median ratios
 * (1.0 = no slower).
 *
 *   node --import tsx bench/webhook-lane-book.bench.ts
 *
 * Before session 22: (1) measured 9.5 (23-65 µs a delivery against 4-6): past 100,000 records the book evicted the
 * oldest retired token of a Set at each record, and V8 finds a Set's first entry by stepping over those deleted
 * before it; (2) measured 7.3 (40-45 µs a delivery against 4-7): a platform's due lanes were an array, and V8
 * shifts an array of more than about 16,000 elements by moving all the others; (3) measured 28.5-38 (1.8 ms a call):
 * every timer was scanned for the platforms not excluded.
 */
import { createLaneBook, type BookRow } from '../src/domain/webhooks/lane-book.ts';
import { median } from './bench-support.ts';

const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 5);
/** Deliveries measured per round and book. */
const DELIVERIES = 50_000;
/** Deliveries a "long-running" book has made before it is measured. */
const RETIRED = 250_000;
/** Rows a read brings at a time (book-reads.ts READ_LIMIT) and lanes a claim takes (the slots). */
const READ = 500;
const SLOTS = 10;
/** Due lanes of one platform at once: a backlog as the webhooks bench's, and one of a receiver's long outage. */
const SMALL_BACKLOG = 5_000;
const LARGE_BACKLOG = 100_000;

let seq = 0;
function rows(n: number): BookRow[] {
  return Array.from({ length: n }, () => {
    seq++;
    return {
      notification_id: `00000000-0000-4000-8000-${String(seq).padStart(12, '0')}`,
      seq,
      lane_partition: seq % 64,
      platform_code: 'BENCH',
      resource_key: `trade-${seq}`,
      state_token: `10000000-0000-4000-8000-${String(seq).padStart(12, '0')}`,
      wait_ms: 0,
    };
  });
}

const newBook = () => createLaneBook<BookRow>({ headsPerLane: 20, maxHeadsPerLane: 40 });
type Book = ReturnType<typeof newBook>;

/** Works through what the book has due as the worker does: claimed, settled (delivered), released; how many. */
function workThrough(book: Book): number {
  let done = 0;
  for (let claims = book.claim(SLOTS); claims.length > 0; claims = book.claim(SLOTS)) {
    for (const claim of claims) {
      for (const head of claim.heads) book.settled(claim.lane, head.notification_id, head.state_token, null);
      book.release(claim.lane);
      done += claim.heads.length;
    }
  }
  return done;
}

/** Takes `n` notifications through the book, READ at a time as the reads bring them. */
function deliver(book: Book, n: number): void {
  for (let done = 0; done < n;) {
    book.add(rows(READ));
    done += workThrough(book);
  }
}

/** CPU µs per delivery of DELIVERIES through `book`. */
function cpuPerDelivery(book: Book): number {
  const before = process.cpuUsage();
  deliver(book, DELIVERIES);
  const used = process.cpuUsage(before);
  return (used.user + used.system) / DELIVERIES;
}

/**
 * CPU µs per delivery of `lanes` due lanes of one platform, one notification each, taken in at once (a backlog, or a
 * receiver back after an outage) and worked through.
 */
function cpuPerDeliveryOfBacklog(lanes: number): number {
  const book = newBook();
  book.add(rows(lanes));
  const before = process.cpuUsage();
  const done = workThrough(book);
  const used = process.cpuUsage(before);
  if (done !== lanes) throw new Error(`delivered ${done} of ${lanes}`);
  return (used.user + used.system) / lanes;
}

/**
 * CPU µs per nextDueInMs call with one platform excluded (its receiver slow, its slots all taken: the dispatcher asks
 * this at every claim that comes back short), while `waiting` of its lanes wait for a retry and one other platform's
 * lane does.
 */
function cpuPerNextDueExcluding(waiting: number): number {
  const book = newBook();
  book.add(rows(waiting).map((row) => ({ ...row, platform_code: 'SLOW', wait_ms: 60_000 })));
  book.add(rows(1).map((row) => ({ ...row, wait_ms: 30_000 })));
  // Calls in blocks until 50 ms of CPU or 200,000 calls: long enough to be measured whether a call takes 0.1 µs or
  // 2 ms.
  const before = process.cpuUsage();
  let calls = 0;
  let usedUs = 0;
  let sum = 0;
  while (usedUs < 50_000 && calls < 200_000) {
    for (let i = 0; i < 100; i++) sum += book.nextDueInMs(['SLOW']) ?? 0;
    calls += 100;
    const used = process.cpuUsage(before);
    usedUs = used.user + used.system;
  }
  if (sum === 0) throw new Error("the other platform's lane was not found");
  return usedUs / calls;
}

/**
 * Measures `baseline` and `subject` alternately, ROUNDS rounds, each printed; then the median of subject / baseline.
 * `sides` names each side in a round's line.
 */
function pairedRatio(
  title: string,
  unit: string,
  sides: { baseline: string; subject: (round: number) => string },
  baseline: () => number,
  subject: () => number,
): void {
  // Once each first, unmeasured, so that neither side's first round is the one that compiles the code.
  baseline();
  subject();
  const ratios: number[] = [];
  for (let round = 1; round <= ROUNDS; round++) {
    const base = baseline();
    const measured = subject();
    ratios.push(measured / base);
    console.log(
      `round ${round}: ${sides.baseline} ${base.toFixed(2)} ${unit}, ${sides.subject(round)} ${measured.toFixed(2)} ${unit}, ratio ${(measured / base).toFixed(2)}`,
    );
  }
  console.log(`${title}: ${median(ratios).toFixed(2)} (median of ${ROUNDS}; 1.0 = no slower)`);
}

const longRunning = newBook();
deliver(longRunning, RETIRED);
pairedRatio(
  'lane book after a while / fresh',
  'µs/delivery',
  // (the warm-up round included)
  { baseline: 'fresh book', subject: (round) => `after ${RETIRED + DELIVERIES * (round + 1)} deliveries` },
  () => cpuPerDelivery(newBook()),
  () => cpuPerDelivery(longRunning),
);
pairedRatio(
  `lane book with ${LARGE_BACKLOG} lanes due / with ${SMALL_BACKLOG}`,
  'µs/delivery',
  { baseline: `${SMALL_BACKLOG} lanes due`, subject: () => `${LARGE_BACKLOG} lanes due` },
  () => cpuPerDeliveryOfBacklog(SMALL_BACKLOG),
  () => cpuPerDeliveryOfBacklog(LARGE_BACKLOG),
);
pairedRatio(
  `next due, ${LARGE_BACKLOG} lanes of an excluded platform waiting / ${SMALL_BACKLOG}`,
  'µs/call',
  {
    baseline: `next due with ${SMALL_BACKLOG} lanes of an excluded platform waiting`,
    subject: () => `with ${LARGE_BACKLOG}`,
  },
  () => cpuPerNextDueExcluding(SMALL_BACKLOG),
  () => cpuPerNextDueExcluding(LARGE_BACKLOG),
);
