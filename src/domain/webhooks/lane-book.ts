import Denque from 'denque';
import TinyQueue from 'tinyqueue';
import { laneKey, type ClaimCap, type Lane } from './delivery-lane.ts';

/**
 * A worker's lanes in memory (webhook-delivery.ts): workers lease partitions of the lanes and find their work with
 * reads after a cursor (lane-reads.repository.ts) rather than claiming rows of a lanes table (migrations 0008-0025),
 * whose bookkeeping was most of PostgreSQL's share of a delivery (bench/webhook-store-costs.bench.ts). The book
 * keeps what that table kept, for the partitions the worker holds: each lane's undelivered notifications in seq
 * order, when its first is due, and whether a slot holds it. It offers what the dispatcher asks for
 * (webhook-dispatcher.ts: claim, release, next due), with the same rules: a lane is worked by one slot at a
 * time, oldest first (wire-contract §5 "Order"); a claim takes an equal share of each platform's due lanes, the
 * platforms in turn (migration 0024), and at most `capped.limit` of the capped platforms' (0022).
 *
 * What the reads bring in is deduplicated here: a notification is known by its id and state token, a new token is a
 * new state (an operator's redelivery), and a token retired by a record of this worker is a stale read, skipped.
 *
 * Memory is bounded per lane: at most `maxHeadsPerLane` of a lane's notifications are held; past them the lane is
 * marked `more` and is refilled from the database (`wantsRefill`) once it runs low, in seq order, so a platform
 * whose receiver has been down for a day holds a few of each lane's notifications, not all of them.
 *
 * Our own structure rather than a library: it is the lanes table's bookkeeping moved into the worker, with that
 * table's rules; the timers' order (a binary heap) comes from one (tinyqueue), and so do the due lanes' queues (denque).
 */

/** An undelivered notification as read, with at least what the book orders and deduplicates by. */
export interface BookRow {
  notification_id: string;
  seq: number;
  lane_partition: number;
  platform_code: string;
  resource_key: string;
  state_token: string;
  /** ms from the read until next_attempt_at (0 when due). */
  wait_ms: number;
}

/** A head as a claim hands it out: the row, with whether it is due and the ms until it is (from the claim). */
export type ClaimedHead<H extends BookRow> = H & { due: boolean };

export interface BookClaim<H extends BookRow> {
  lane: Lane;
  partition: number;
  /** The lane's first notifications, in order, up to `headsPerLane`. */
  heads: Array<ClaimedHead<H>>;
}

/** What a lane still needs read from the database: its undelivered notifications after `afterSeq`. */
export interface RefillWanted {
  lane: Lane;
  afterSeq: number;
}

export interface LaneBookOptions {
  /** Monotonic ms (performance.now by default; tests move it). */
  now?: () => number;
  /** Heads a claim hands out per lane. */
  headsPerLane: number;
  /** Heads held per lane at most (at least headsPerLane). */
  maxHeadsPerLane: number;
}

interface Head<H> {
  row: H;
  /** Monotonic ms when it may be attempted. */
  dueAt: number;
}

interface BookLane<H> {
  key: string;
  lane: Lane;
  partition: number;
  heads: Array<Head<H>>;
  /** The highest seq taken in: the lane's undelivered notifications up to it are held (or on their way in). */
  readUpTo: number;
  /** The database has undelivered notifications of the lane after readUpTo that are not held. */
  more: boolean;
  /** A slot holds it (claimed, not released). */
  held: boolean;
  /** Bumped at each scheduling: queue entries of an older version are stale. */
  version: number;
}

interface Entry<H> {
  lane: BookLane<H>;
  version: number;
  dueAt: number;
}

export interface LaneBook<H extends BookRow> {
  /**
   * Takes in rows read (new notifications, new states of known ones, a refill's); see the module comment. Returns
   * the lanes a slot holds whose order changed under it (a notification placed before others, a new state): the
   * slot's copy of their heads is out of date.
   */
  add(rows: readonly H[]): Lane[];
  /**
   * The answer to a refill asked for after `afterSeq` (wantsRefill): `rows` are the lane's next undelivered
   * notifications; `complete` when they are all. An answer to a question the lane no longer asks (it let go of
   * notifications meanwhile, `trim` or its bound) is dropped, and the lane asks again.
   */
  refilled(lane: Lane, rows: readonly H[], complete: boolean, afterSeq: number): void;
  /** Lanes running low with more in the database. */
  wantsRefill(): RefillWanted[];
  /** Whether some lane runs low with more in the database. */
  needsRefill(): boolean;
  /**
   * Up to `limit` due lanes no slot holds, now held, each with its first heads; none of the `excluded` platforms
   * (whose notifications are being read afresh).
   */
  claim(limit: number, capped?: ClaimCap | null, excluded?: ReadonlySet<string>): Array<BookClaim<H>>;
  /**
   * A slot is done with the lane (its records have landed): due again by its first head, if any. Whether it has one
   * (if not, there is nothing new for the slots).
   */
  release(lane: Lane): boolean;
  /**
   * A record of a lane's notification landed. `next` null: it is done (delivered, dead, skipped), or its state
   * changed under us (an operator's redelivery: the reads bring its new state). Otherwise it stays, with the
   * fields given (its new state token among them) and due in `waitMs`.
   *
   * `moved` false: the database kept the notification on `token` (a record that landed after the partition's
   * lease ran out moves nothing on). The token is then not retired: the partition's next holder, this worker
   * again as often as not, reads the notification with it, and must take it in. Retired, it was dropped as a
   * stale read, left pending for good while later notifications of its resource went ahead (review).
   */
  settled(
    lane: Lane,
    notificationId: string,
    token: string,
    next: { update: Partial<H>; waitMs: number } | null,
    moved?: boolean,
  ): void;
  /** ms until the next lane is due (0: now), null when none; of the platforms not `excluded`. */
  nextDueInMs(excluded?: readonly string[]): number | null;
  /** Drops the lanes of a partition given back or lost; returns false (and drops nothing) while a slot holds one. */
  dropPartition(partition: number): boolean;
  /** Claims no more of a partition's lanes, until it is dropped (a partition lost while a slot holds one). */
  freezePartition(partition: number): void;
  /**
   * Lets go of what lanes waiting for a retry hold after their first notification, the lanes due last first, until at
   * most `maxHeld` notifications are held (or no such lane is left); they are read again once a slot has worked
   * the first. Returns how many were let go. A receiver that is down then costs the book one notification per lane,
   * not up to maxHeadsPerLane.
   */
  trim(maxHeld: number): number;
  /** Notifications held, and lanes. */
  size(): { heads: number; lanes: number };
}

/** Retired tokens a generation holds (see `retired`): the book knows the latest 100,000 to 200,000. */
const RETIRED_PER_GENERATION = 100_000;

export function createLaneBook<H extends BookRow>(options: LaneBookOptions): LaneBook<H> {
  const now = options.now ?? (() => performance.now());
  const { headsPerLane } = options;
  const maxHeads = Math.max(options.maxHeadsPerLane, headsPerLane);
  /** Refill a lane once it holds fewer than this. */
  const lowWater = Math.max(1, Math.ceil(maxHeads / 2));
  const lanes = new Map<string, BookLane<H>>();
  /** Due lanes per platform, oldest due first; the map's order is the platforms' turn. */
  const ready = new Map<string, Denque<Entry<H>>>();
  /**
   * Lanes due later (retries), per platform, soonest first: binary heaps (tinyqueue), one per platform so that the next
   * due of the platforms not excluded is one look each (nextDueInMs).
   */
  const waiting = new Map<string, TinyQueue<Entry<H>>>();
  /**
   * Tokens this worker's records moved notifications away from: a read that brings one back is stale
   * (it began before the record landed). Every token, not only a notification's last: a read can land after two
   * records of one notification (a fast retry). Bounded in two generations of RETIRED_PER_GENERATION, the older
   * dropped whole when the newer fills, so at least that many of the latest are known: evicting the oldest entry
   * of one Set at each record cost 20-60 µs a delivery once a worker had made 100,000
   * (bench/webhook-lane-book.bench.ts): V8 reaches a Set's first entry by stepping over those deleted before it.
   * A token alone names one state of one notification (a random UUID, drawn for it), and it is the row's own
   * string: keyed with the id as well, each record made a string of its own to keep.
   */
  let retired = new Set<string>();
  let retiredBefore = new Set<string>();
  const isRetired = (key: string) => retired.has(key) || retiredBefore.has(key);
  const refills = new Set<BookLane<H>>();
  let heldHeads = 0;

  /** Partitions being dropped, whose lanes are not claimed meanwhile. */
  const frozen = new Set<number>();
  const valid = (entry: Entry<H>) =>
    entry.version === entry.lane.version && !entry.lane.held && !frozen.has(entry.lane.partition);

  /**
   * Whether the lane runs low with more in the database, and needs that more now: not while its first notification
   * waits for a retry (a lane trimmed to its first, `trim`, is refilled once that is done; a retry read again at each
   * failure would only be trimmed again).
   */
  function wantsMore(lane: BookLane<H>): boolean {
    if (!lane.more || lane.heads.length >= lowWater) return false;
    const first = lane.heads[0];
    return first === undefined || first.dueAt <= now();
  }

  /** Puts a lane in the queue its first head says, or forgets it when it has nothing left. */
  function schedule(lane: BookLane<H>): void {
    lane.version++;
    if (wantsMore(lane)) refills.add(lane);
    else refills.delete(lane);
    if (lane.held) return;
    const first = lane.heads[0];
    if (!first) {
      if (!lane.more) lanes.delete(lane.key);
      return;
    }
    const entry = { lane, version: lane.version, dueAt: first.dueAt };
    if (first.dueAt <= now()) queueReady(entry);
    else queueWaiting(entry);
  }

  /** The entry's platform's queue in `queues`, made by `make` if it has none yet. */
  function queueOf<Q>(queues: Map<string, Q>, entry: Entry<H>, make: () => Q): Q {
    const platform = entry.lane.lane.platformCode;
    let queue = queues.get(platform);
    if (!queue) queues.set(platform, (queue = make()));
    return queue;
  }

  function queueWaiting(entry: Entry<H>): void {
    queueOf(waiting, entry, () => new TinyQueue<Entry<H>>([], (a, b) => a.dueAt - b.dueAt)).push(entry);
  }

  /** A platform's soonest timer that is still valid, the stale ones before it dropped (and the heap, once empty). */
  function firstWaiting(platform: string, heap: TinyQueue<Entry<H>>): Entry<H> | undefined {
    while (heap.length > 0 && !valid(heap.peek()!)) heap.pop();
    if (heap.length === 0) waiting.delete(platform);
    return heap.peek();
  }

  function queueReady(entry: Entry<H>): void {
    // A double-ended queue, not an array: V8 shifts an array of more than about 16,000 elements by moving every
    // other one, and a platform back from an outage has that many lanes due (bench/webhook-lane-book.bench.ts).
    queueOf(ready, entry, () => new Denque<Entry<H>>()).push(entry);
  }

  /** Moves the lanes whose time has come from the timers to the ready queues. */
  function promoteDue(): void {
    const at = now();
    for (const [platform, heap] of waiting) {
      for (let top = heap.peek(); top && top.dueAt <= at; top = heap.peek()) {
        heap.pop();
        if (valid(top)) queueReady(top);
      }
      if (heap.length === 0) waiting.delete(platform);
    }
  }

  function laneOf(row: H): BookLane<H> {
    const key = laneKey({ platformCode: row.platform_code, resourceKey: row.resource_key });
    let lane = lanes.get(key);
    if (!lane) {
      lane = {
        key,
        lane: { platformCode: row.platform_code, resourceKey: row.resource_key },
        partition: row.lane_partition,
        heads: [],
        readUpTo: 0,
        more: false,
        held: false,
        version: 0,
      };
      lanes.set(key, lane);
    }
    return lane;
  }

  /** takeIn's answer: the lane's first head changed; a head was placed before others, or changed state. */
  const FIRST = 1;
  const REORDERED = 2;

  /** Takes one row into its lane; what changed (FIRST, REORDERED). */
  function takeIn(lane: BookLane<H>, row: H): number {
    if (isRetired(row.state_token)) return 0;
    const dueAt = now() + row.wait_ms;
    const known = lane.heads.findIndex((h) => h.row.notification_id === row.notification_id);
    if (known >= 0) {
      const head = lane.heads[known]!;
      if (head.row.state_token === row.state_token) return 0;
      // A new state (an operator's redelivery): same place in the lane, new token and schedule.
      lane.heads[known] = { row, dueAt };
      return REORDERED | (known === 0 ? FIRST : 0);
    }
    if (row.seq > lane.readUpTo && lane.more) return 0; // the refill reads it, in order
    let at = lane.heads.length;
    while (at > 0 && lane.heads[at - 1]!.row.seq > row.seq) at--;
    const changed = (at === 0 ? FIRST : 0) | (at < lane.heads.length ? REORDERED : 0);
    lane.heads.splice(at, 0, { row, dueAt });
    heldHeads++;
    if (row.seq > lane.readUpTo) lane.readUpTo = row.seq;
    // Over the bound: the last is let go, to be read again by a refill.
    if (lane.heads.length > maxHeads) letGoAfter(lane, maxHeads);
    return changed;
  }

  /** Keeps the lane's first `keep` notifications; the rest are the database's, read again by a refill after them. */
  function letGoAfter(lane: BookLane<H>, keep: number): void {
    heldHeads -= lane.heads.length - keep;
    lane.heads.length = keep;
    lane.more = true;
    lane.readUpTo = lane.heads[keep - 1]!.row.seq;
  }

  function addRows(rows: readonly H[]): Lane[] {
    const changed = new Set<BookLane<H>>();
    const reordered = new Set<BookLane<H>>();
    for (const row of rows) {
      const lane = laneOf(row);
      const wasEmpty = lane.heads.length === 0;
      const what = takeIn(lane, row);
      if (what & FIRST || wasEmpty) changed.add(lane);
      else if (wantsMore(lane)) refills.add(lane);
      if (what & REORDERED && lane.held) reordered.add(lane);
    }
    for (const lane of changed) schedule(lane);
    return [...reordered].map((lane) => lane.lane);
  }

  return {
    add: addRows,

    refilled(lane, rows, complete, afterSeq) {
      const book = lanes.get(laneKey(lane));
      if (!book) return;
      if (book.readUpTo !== afterSeq) {
        // Taking these in would skip those the lane let go of after afterSeq was asked for (review, session 22).
        if (wantsMore(book)) refills.add(book);
        return;
      }
      // Taken in with `more` off, so that each is placed after the last held; the bound turns it on again if
      // they overflow, and so does an answer that is not all there is.
      book.more = false;
      for (const row of rows) takeIn(book, row);
      if (!complete) book.more = true;
      schedule(book);
    },

    wantsRefill() {
      return [...refills].map((lane) => ({ lane: lane.lane, afterSeq: lane.readUpTo }));
    },

    needsRefill: () => refills.size > 0,

    claim(limit, capped, excluded) {
      promoteDue();
      const claimed: Array<BookClaim<H>> = [];
      const cappedPlatforms = new Set(capped?.platforms ?? []);
      let cappedLeft = capped ? capped.limit : Infinity;
      const at = now();
      // The platforms in turn, one lane each a pass; a platform served goes to the back of the turn.
      for (let progress = true; progress && claimed.length < limit;) {
        progress = false;
        for (const [platform, queue] of [...ready]) {
          if (claimed.length >= limit) break;
          if (excluded?.has(platform)) continue;
          const isCapped = cappedPlatforms.has(platform);
          if (isCapped && cappedLeft <= 0) continue;
          let entry = queue.shift();
          while (entry && !valid(entry)) entry = queue.shift();
          ready.delete(platform);
          if (!entry) continue;
          if (queue.length > 0) ready.set(platform, queue);
          if (isCapped) cappedLeft--;
          const lane = entry.lane;
          lane.held = true;
          lane.version++;
          const heads = lane.heads.slice(0, headsPerLane).map(({ row, dueAt }) => ({
            ...row,
            due: dueAt <= at,
            wait_ms: Math.max(0, dueAt - at),
          }));
          claimed.push({ lane: lane.lane, partition: lane.partition, heads });
          progress = true;
        }
      }
      return claimed;
    },

    release(lane) {
      const book = lanes.get(laneKey(lane));
      if (!book || !book.held) return false;
      book.held = false;
      schedule(book);
      return book.heads.length > 0;
    },

    settled(lane, notificationId, token, next, moved = true) {
      const book = lanes.get(laneKey(lane));
      const at = book?.heads.findIndex((h) => h.row.notification_id === notificationId) ?? -1;
      if (!book || at < 0 || book.heads[at]!.row.state_token !== token) return;
      if (next === null) {
        book.heads.splice(at, 1);
        heldHeads--;
      } else {
        const row = { ...book.heads[at]!.row, ...next.update };
        book.heads[at] = { row, dueAt: now() + next.waitMs };
      }
      // Only a record of ours moves a token on: a read bringing the old one back read before the record landed.
      if (moved) {
        retired.add(token);
        if (retired.size >= RETIRED_PER_GENERATION) {
          retiredBefore = retired;
          retired = new Set();
        }
      }
      if (!book.held) schedule(book);
      else if (wantsMore(book)) refills.add(book);
    },

    nextDueInMs(excluded = []) {
      const skip = new Set(excluded);
      for (const [platform, queue] of ready) {
        if (skip.has(platform)) continue;
        while (queue.length > 0 && !valid(queue.peekFront()!)) queue.shift();
        if (queue.length > 0) return 0;
      }
      // One look per platform: with a platform excluded (its receiver slow, its slots taken), a scan of every timer
      // cost 1.8 ms a call with 100,000 of its lanes waiting, at each claim that came back short.
      let first: number | null = null;
      for (const [platform, heap] of waiting) {
        if (skip.has(platform)) continue;
        const entry = firstWaiting(platform, heap);
        if (entry && (first === null || entry.dueAt < first)) first = entry.dueAt;
      }
      return first === null ? null : Math.max(0, Math.ceil(first - now()));
    },

    dropPartition(partition) {
      const ofPartition = [...lanes.values()].filter((lane) => lane.partition === partition);
      if (ofPartition.some((lane) => lane.held)) return false;
      frozen.delete(partition);
      for (const lane of ofPartition) {
        lanes.delete(lane.key);
        refills.delete(lane);
        heldHeads -= lane.heads.length;
        lane.version++; // its queue entries are stale
      }
      return true;
    },

    freezePartition(partition) {
      frozen.add(partition);
    },

    trim(maxHeld) {
      const before = heldHeads;
      // The lanes waiting for a retry are those of the valid timer entries; the latest due are needed last.
      // Not those whose time has come but that no claim has taken yet (the slots busy): they are about to be worked.
      const at = now();
      const parked = [...waiting.values()].flatMap((heap) =>
        heap.data.filter((entry) => entry.dueAt > at && valid(entry) && entry.lane.heads.length > 1),
      );
      parked.sort((a, b) => b.dueAt - a.dueAt);
      for (const { lane } of parked) {
        if (heldHeads <= maxHeld) break;
        letGoAfter(lane, 1);
        refills.delete(lane);
      }
      return before - heldHeads;
    },

    size: () => ({ heads: heldHeads, lanes: lanes.size }),
  };
}
