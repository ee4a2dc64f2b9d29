import type { ReceiverPace } from './receiver-pace.ts';
import type { ClaimCap, ClaimedLane } from './delivery-lane.ts';

/**
 * A worker process's webhook dispatcher: keeps up to `concurrency` lanes being worked at once, and a few
 * times as many claimed and ready, so a slot that frees up starts its next delivery at once. It claims many
 * lanes at a time (from the worker's lane book, lane-book.ts), when slots run short of ready lanes, and while
 * the last claim found all it asked for. Otherwise it sleeps until it is woken (`wake()`: notifications read,
 * a lane given back with work left), or until the next lane is due (a retry), or at the latest
 * `pollIntervalMs`.
 *
 * A platform whose receiver is slow (receiver-pace.ts: an attempt over a second, e.g. one that hangs until the
 * timeout) holds a slot for that long per lane, and its backlog, due before the other platforms' work, took
 * every slot in turn. So while other platforms' lanes are waiting, the lanes of slow platforms share at most
 * `slowSlots()` (half) of the slots: past them, the other platforms' lanes start first, the claims take no
 * more of the slow platforms' lanes than may start, and the ones in hand that may not start are given back. While no other platform's lane is waiting (the last claim found none), they may
 * take every slot but one, kept for the next other lane to come.
 *
 * An attempt that has run for over a second (the receiver's answer late, or never coming) is only waiting on a
 * socket: the lane is parked (`park`, called by the lane's work), its slot freed for the next lane, for up to
 * PARKED_PER_SLOT × `concurrency` lanes parked at once. Receivers that hang on many platforms that were not
 * known slow yet (each one's first attempts start like any other's) otherwise took every slot for a whole
 * attempt timeout, wave after wave, while every other platform's webhooks waited (review: 20 s). A parked lane
 * does not count among its platform's lanes for the slow receivers' share of the slots (it holds none), but a
 * platform has at most its share (`slowSlots()`) of lanes parked at once: a slow receiver is sent at most about
 * `concurrency` attempts at a time, half of them parked, while other platforms' lanes wait. A lane refused parking
 * (a bound reached) is asked again at its next sweep.
 *
 * Why our own loop rather than a graphile-worker job per lane (DESIGN §5 allows a table of our own for
 * per-resource order and the delivery schedule): the queue's fixed cost per job, not the delivery, bounded
 * the delivery rate (bench/webhooks.bench.ts); a claim here costs no statement at all.
 */
export type ReadyLane<L extends ClaimedLane = ClaimedLane> = L & {
  /** performance.now() when it was claimed. */
  claimSentAt: number;
};

export interface DispatcherOptions<L extends ClaimedLane = ClaimedLane> {
  concurrency: number;
  pollIntervalMs: number;
  /** Monotonic ms (performance.now by default; tests move it). */
  now?: () => number;
  /** Which receivers are slow: their platforms share at most `slowSlots(concurrency)` slots (see above). */
  pace?: Pick<ReceiverPace, 'isSlow' | 'anySlow' | 'slowPlatforms'>;
  /** Claims up to `limit` due lanes, at most `capped.limit` of them of the `capped` platforms. */
  claim(limit: number, capped: ClaimCap | null): Promise<L[]>;
  /**
   * Works a claimed lane and gives it back; resolves when done. Does not reject for a receiver's failure. Its
   * attempt under way having taken over a second, it calls `park` (see above); whether its slot was freed is
   * returned (not when PARKED_PER_SLOT × concurrency lanes are parked already).
   */
  work(lane: ReadyLane<L>, signal: AbortSignal, park: () => boolean): Promise<void>;
  /** Gives back lanes claimed but not started (at stop, or more than the prefetch holds). */
  release(lanes: L[]): Promise<void>;
  /** ms until the next lane is due, null when there is none, of the platforms not `excluded`. */
  nextDueInMs(excluded: string[]): Promise<number | null>;
  onError(err: unknown, message: string): void;
  /**
   * Every slot stayed taken for READY_WAIT_MAX_MS (receivers that hang): `lanes` claimed were given back, and no
   * more are claimed until a slot frees (the worker lets other workers take what it cannot start).
   */
  onSlotsStuck?(lanes: number): void;
  /**
   * A slot freed (a lane ended, or was parked): claims may go on. Called for every slot freed, so that whoever
   * was told the slots were stuck hears the end of it the moment the dispatcher does.
   */
  onSlotFreed?(): void;
}

export interface Dispatcher<L extends ClaimedLane = ClaimedLane> {
  /** There may be new due work: claim now if a slot is free. */
  wake(): void;
  /**
   * Gives back the lanes claimed and not started that `concerns` picks (an operator changed what they hold),
   * then claims afresh.
   */
  refresh(concerns: (lane: ReadyLane<L>) => boolean): void;
  /**
   * Stops claiming, signals the lanes being worked to stop before their next attempt, gives back the lanes
   * not started, and resolves once every lane has stopped.
   */
  stop(): Promise<void>;
}

/**
 * Deliveries held per slot at most (being worked or ready). With one notification per lane a slot needs a new
 * lane per delivery: with 4 per slot the slots sat idle between claims (bench/webhooks.bench.ts). Counted in
 * deliveries, not lanes: 80 lanes of 20 notifications each held 1,600 deliveries, and the lanes at the end of
 * the queue went stale before a slot was free, then waited for their lease to run out (review).
 */
const PREFETCH = 8;
/** Shortest idle sleep: a lane due "now" that the last claim did not get is about to be released by its holder. */
const MIN_IDLE_MS = 5;
/**
 * Longest of those sleeps while claims keep finding only lanes with nothing to deliver yet: lanes a producer
 * is recording into, which their release leaves due until the producer commits (its NOTIFY wakes us then).
 * Claiming them every 5 ms meanwhile cost hundreds of statements a second (review).
 */
const MAX_EMPTY_IDLE_MS = 200;
/**
 * After a failed claim or next-due query (a connection lost, the database restarting), the first wait before
 * trying again, doubled at each failure in a row up to the poll interval: waiting the whole poll interval at
 * once left due work waiting that long for one lost connection (review: 60 s with a 60 s poll).
 */
const FIRST_RETRY_MS = 100;
/**
 * How long a claimed lane may wait in the ready queue while every slot is taken and none frees (receivers that
 * hang): then the lanes that waited that long are given back, and this one claims no more until a slot frees
 * (onSlotsStuck: the worker then lets another take the partitions it is not working). A full worker kept them from an idle one until a slot freed, one
 * attempt timeout (10 s) at a time (review). Claims return lanes in due order (migration 0021), so the lanes
 * given back are claimed again in their turn, not ahead of older work.
 */
const READY_WAIT_MAX_MS = 1_000;
/**
 * Lanes parked (their attempt waiting on a late receiver, their slot freed) per slot at most: each holds a
 * connection and its partition's lease until its attempt ends, at the latest at the attempt timeout.
 */
export const PARKED_PER_SLOT = 4;

/**
 * The slots the lanes of slow receivers may hold together while other platforms' lanes are waiting: half, so
 * that the other platforms keep the other half (with one slot there is no half to keep: slow and other lanes
 * take turns in it).
 */
export function slowSlots(concurrency: number): number {
  return Math.max(1, Math.floor(concurrency / 2));
}

export function startDispatcher<L extends ClaimedLane>(options: DispatcherOptions<L>): Dispatcher<L> {
  const { concurrency, pace } = options;
  const slowSlotCount = slowSlots(concurrency);
  /** The slots the lanes of slow receivers may hold while no other platform's lane waits: all but one. */
  const slowSlotsAlone = Math.max(slowSlotCount, concurrency - 1);
  const isSlow = (lane: ClaimedLane) => pace!.isSlow(lane.lane.platformCode);
  const now = options.now ?? (() => performance.now());
  const ready: ReadyLane<L>[] = [];
  /** The deliveries the lanes in `ready` hold (a lane found empty still takes a slot: 1). */
  let readyWork = 0;
  const workOf = (lane: ClaimedLane) => Math.max(1, lane.heads.length);
  /** Deliveries per lane claimed lately (a moving average): how many lanes the room for deliveries takes. */
  let workPerLane = 1;
  /** The lanes being worked, by their work's promise (parked ones too). */
  const running = new Map<Promise<void>, ReadyLane<L>>();
  /** The lanes of `running` parked: their slots are free. */
  const parked = new Set<Promise<void>>();
  const maxParked = PARKED_PER_SLOT * concurrency;
  /** Whether a slot is free: `concurrency` less the lanes being worked, parked ones aside. */
  const slotFree = () => running.size - parked.size < concurrency;
  const abort = new AbortController();
  let claiming: Promise<void> | null = null;
  let stopped = false;
  /** Whether the last claim came back full, or something woke us since: more due work may be waiting. */
  let wanted = true;
  /** Counts wake-ups, so a claim that comes back short does not cancel one that arrived meanwhile. */
  let wakeups = 0;
  let idleTimer: NodeJS.Timeout | null = null;
  /** Every slot stayed taken while lanes waited READY_WAIT_MAX_MS: no claims until one frees. */
  let slotsStuck = false;
  /**
   * Whether the last claim found lanes of receivers that are not slow, or came back full (there may be more of
   * them due): the slow ones then keep to slowSlotCount.
   */
  let othersFound = true;
  /** Whether the lane started last was a slow receiver's (for the turns of a single slot). */
  let lastStartedSlow = false;
  /** When a slot last freed (or the dispatcher started). */
  let slotFreedAt = now();
  let stuckTimer: NodeJS.Timeout | null = null;
  /** Claims in a row that found lanes but nothing in them to deliver. */
  let emptyClaims = 0;
  /** The wait after the next failure to claim (FIRST_RETRY_MS, doubling while failures go on). */
  let retryInMs = FIRST_RETRY_MS;
  const afterFailure = () => {
    const ms = Math.min(retryInMs, options.pollIntervalMs);
    retryInMs = Math.min(retryInMs * 2, options.pollIntervalMs);
    return ms;
  };

  function pump(): void {
    if (pace?.anySlow()) startWithinSlowSlots();
    else {
      // The usual case, every receiver in time: the lanes start in order, with no per-lane check.
      while (!stopped && slotFree() && ready.length > 0) {
        const lane = ready.shift()!;
        readyWork -= workOf(lane);
        lastStartedSlow = false;
        start(lane);
      }
    }
    if (!stopped && wanted && !claiming && !slotsStuck && readyWork < 2 * concurrency) claiming = claimMore();
    watchForStuckSlots();
  }

  /** The slots the lanes of slow receivers may hold now. */
  function slowLimit(): number {
    if (!othersFound && !ready.some((lane) => !isSlow(lane))) return slowSlotsAlone;
    // With one slot, half of it is all of it: a slow lane after a slow lane would let a backlog of them go
    // first (review: 88 s for 30 lanes), so the others get every other turn.
    if (concurrency === 1) return lastStartedSlow ? 0 : 1;
    return slowSlotCount;
  }

  /** The lanes of slow receivers being worked in slots (parked ones hold none). */
  function slowRunning(): number {
    let count = 0;
    for (const [work, lane] of running) if (!parked.has(work) && isSlow(lane)) count++;
    return count;
  }

  /** The platform's lanes parked. */
  function parkedOf(platformCode: string): number {
    let count = 0;
    for (const work of parked) if (running.get(work)?.lane.platformCode === platformCode) count++;
    return count;
  }

  /**
   * As pump's loop while some receiver is slow: the ready lanes start in order, but those of slow receivers
   * only while fewer than slowLimit() of theirs run; the others pass them. Those that may not start soon
   * (more than the free slow slots) are given back; this one's claims leave them until a slow slot frees.
   */
  function startWithinSlowSlots(): void {
    const limit = slowLimit();
    let slowInUse = slowRunning();
    for (let i = 0; !stopped && slotFree() && i < ready.length;) {
      const lane = ready[i]!;
      const slow = isSlow(lane);
      if (slow && slowInUse >= limit) {
        i++;
        continue;
      }
      ready.splice(i, 1);
      readyWork -= workOf(lane);
      if (slow) slowInUse++;
      lastStartedSlow = slow;
      start(lane);
    }
    const readyBefore = ready.length;
    let mayStart = limit - slowInUse;
    const waiting = takeReady((lane) => isSlow(lane) && mayStart-- <= 0);
    if (waiting.length > 0) giveBack(waiting);
    // The room they leave is claimed: other platforms' lanes may be due.
    if (ready.length < readyBefore) wanted = true;
  }

  /**
   * While lanes wait for a slot, looks again once the oldest of them (the first) has waited READY_WAIT_MAX_MS
   * and no slot has freed for as long.
   */
  function watchForStuckSlots(): void {
    if (stopped || stuckTimer || ready.length === 0) return;
    const since = Math.max(ready[0]!.claimSentAt, slotFreedAt);
    stuckTimer = setTimeout(
      () => {
        stuckTimer = null;
        if (stopped || slotFree()) return;
        if (now() - slotFreedAt >= READY_WAIT_MAX_MS) {
          const waited = takeReady((lane) => now() - lane.claimSentAt >= READY_WAIT_MAX_MS);
          if (waited.length > 0) {
            slotsStuck = true;
            giveBack(waited);
            options.onSlotsStuck?.(waited.length);
          }
        }
        watchForStuckSlots();
      },
      Math.max(0, since + READY_WAIT_MAX_MS - now()),
    );
    stuckTimer.unref();
  }

  /**
   * Takes the lanes `pick` chooses out of the ready queue (the rest keep their order), and returns them, to be
   * given back.
   */
  function takeReady(pick: (lane: ReadyLane<L>) => boolean): ReadyLane<L>[] {
    const taken: ReadyLane<L>[] = [];
    const kept: ReadyLane<L>[] = [];
    for (const lane of ready) (pick(lane) ? taken : kept).push(lane);
    ready.splice(0, ready.length, ...kept);
    readyWork = kept.reduce((sum, lane) => sum + workOf(lane), 0);
    return taken;
  }

  function start(lane: ReadyLane<L>): void {
    // Declared first: `park` may be called at any time after the work has begun.
    let done: Promise<void> | null = null;
    const park = (): boolean => {
      if (done === null || !running.has(done)) return false;
      if (parked.has(done)) return true;
      if (parked.size >= maxParked || parkedOf(lane.lane.platformCode) >= slowSlotCount) return false;
      parked.add(done);
      freed();
      return true;
    };
    const work: Promise<void> = options
      .work(lane, abort.signal, park)
      .catch((err: unknown) => options.onError(err, 'webhook lane failed'))
      .finally(() => {
        running.delete(work);
        // A parked lane's slot was freed when it was parked.
        if (!parked.delete(work)) freed();
      });
    done = work;
    running.set(work, lane);
  }

  /**
   * A slot is free: the next ready lane starts, and more are claimed if the last claim found all it asked for.
   * Work the lane has left wakes us (`wake`) once its release has landed, when it can be claimed; waking here,
   * before that, only claimed nothing, or a lane claimed empty again in a loop.
   */
  function freed(): void {
    slotsStuck = false;
    slotFreedAt = now();
    options.onSlotFreed?.();
    pump();
  }

  async function claimMore(): Promise<void> {
    const wakeupsBefore = wakeups;
    const room = () => PREFETCH * concurrency - (running.size - parked.size) - readyWork;
    const limit = Math.max(1, Math.ceil(room() / workPerLane));
    const capped = claimCap();
    try {
      const claimSentAt = now();
      const lanes = await options.claim(limit, capped);
      retryInMs = FIRST_RETRY_MS;
      othersFound = lanes.length >= limit || !pace || lanes.some((lane) => !isSlow(lane));
      if (lanes.length > 0) {
        emptyClaims = lanes.some((l) => l.heads.length > 0) ? 0 : emptyClaims + 1;
        const work = lanes.reduce((sum, lane) => sum + workOf(lane), 0);
        workPerLane = 0.7 * workPerLane + 0.3 * (work / lanes.length);
      }
      if (stopped) {
        await options.release(lanes);
        return;
      }
      // The oldest first, as long as there is room (at least one); the rest are given back at once, while they
      // are certainly ours, for this or another worker to claim when it has room.
      let excess = 0;
      for (const [i, lane] of lanes.entries()) {
        if (i > 0 && workOf(lane) > room()) {
          excess = lanes.length - i;
          break;
        }
        ready.push({ ...lane, claimSentAt });
        readyWork += workOf(lane);
      }
      if (excess > 0) giveBack(lanes.slice(lanes.length - excess));
      if (lanes.length < limit && wakeups === wakeupsBefore) {
        wanted = false;
        // The slow platforms the next claim would take none of: their due lanes would only wake us to claim
        // nothing.
        const cap = claimCap();
        await sleepUntilDue(cap?.limit === 0 ? cap.platforms : []);
      }
    } catch (err) {
      options.onError(err, 'webhook lane claim failed');
      wanted = false;
      idleIn(afterFailure());
    } finally {
      claiming = null;
      pump();
    }
  }

  /**
   * While some receivers are slow: the lanes of theirs a claim may take, so that those ready with those
   * running do not pass slowLimit().
   */
  function claimCap(): ClaimCap | null {
    if (!pace?.anySlow()) return null;
    const platforms = pace.slowPlatforms();
    let slowReady = 0;
    for (const lane of ready) if (isSlow(lane)) slowReady++;
    return { platforms, limit: Math.max(0, slowLimit() - slowRunning() - slowReady) };
  }

  /** Releases under way (giveBack), which stop waits for: the connections close after it. */
  const givingBack = new Set<Promise<void>>();
  function giveBack(lanes: L[]): void {
    const done: Promise<void> = options
      .release(lanes)
      .catch((err: unknown) => options.onError(err, 'webhook lane release failed'))
      .finally(() => givingBack.delete(done));
    givingBack.add(done);
  }

  async function sleepUntilDue(excluded: string[]): Promise<void> {
    let failed = false;
    const dueInMs = await options.nextDueInMs(excluded).catch((err: unknown) => {
      options.onError(err, 'webhook next-due query failed');
      failed = true;
      return null;
    });
    if (wanted) return;
    const minIdleMs = Math.min(MAX_EMPTY_IDLE_MS, MIN_IDLE_MS * 2 ** Math.min(emptyClaims, 8));
    if (failed) idleIn(afterFailure());
    else idleIn(Math.max(minIdleMs, Math.min(dueInMs ?? Infinity, options.pollIntervalMs)));
  }

  function idleIn(ms: number): void {
    if (stopped) return;
    if (idleTimer) clearTimeout(idleTimer);
    idleTimer = setTimeout(wake, ms);
    idleTimer.unref();
  }

  function wake(): void {
    wakeups++;
    wanted = true;
    if (idleTimer) {
      clearTimeout(idleTimer);
      idleTimer = null;
    }
    pump();
  }

  pump();

  return {
    wake,
    refresh(concerns) {
      const unstarted = takeReady(concerns);
      if (unstarted.length === 0) return;
      options
        .release(unstarted)
        .catch((err: unknown) => options.onError(err, 'webhook lane release failed'))
        .finally(wake);
    },
    async stop() {
      if (stopped) return;
      stopped = true;
      if (idleTimer) clearTimeout(idleTimer);
      if (stuckTimer) clearTimeout(stuckTimer);
      abort.abort();
      const unstarted = takeReady(() => true);
      await claiming;
      await Promise.all([
        options
          .release(unstarted)
          .catch((err: unknown) => options.onError(err, 'webhook lane release failed')),
        ...running.keys(),
        ...givingBack,
      ]);
    },
  };
}
