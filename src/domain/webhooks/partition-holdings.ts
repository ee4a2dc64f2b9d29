import type { Db } from '../../store/database.ts';
import { within } from '../../lib/within.ts';
import * as repo from './webhooks.repository.ts';
import { createFailureLog } from '../../lib/failure-log.ts';
import type { Log } from '../../lib/log.ts';

/**
 * The partitions of the lanes one worker process holds (migration 0026, webhook-delivery.ts step 1): their leases,
 * renewed every second; a fair share taken, or given back when another worker is short of its share or every slot
 * hangs; a partition lost when its lease ran out and another worker took it. What the rest of the worker asks of
 * it: which partitions to load and which are loaded (the reads), and whether a partition's lease is fresh enough
 * for an attempt to start (issue 4 point 5).
 */

/** Partitions lost together, and how many of their lanes were being worked. */
interface Lost {
  partitions: number[];
  lanes: number;
}

/** How often a worker renews its partitions' leases (and takes or gives back some). */
const RENEW_EVERY_MS = 1_000;
/**
 * Longest wait of an attempt for the next renewal while renewals fail. Under the dispatcher's READY_WAIT_MAX_MS
 * (1 s, webhook-dispatcher.ts): lanes waiting for a renewal as long as that took every slot for it, and the
 * dispatcher read an outage as receivers that hang, giving back the partitions it held, book and all (review).
 */
const RENEWAL_WAIT_MAX_MS = 400;

/** A partition held: one given back and taken again is a new holding (its backlog read afresh). */
export interface Holding {
  readonly partition: number;
  /** performance.now() when the newest renewal known to have held was sent. */
  confirmedAt: number;
  /** Its backlog has been read (loadPartitions): the reads after the cursor cover it from then on. */
  loaded: boolean;
}

export interface PartitionHoldingsDeps {
  /** The delivery bookkeeping's connections. */
  db: Db;
  owner: string;
  /** The lease: the request timeout + 5 s + slackMs. */
  leaseMs: number;
  /** How old the last confirmed renewal may be when an attempt starts. */
  slackMs: number;
  logger: Log;
  /** Lets the partition's lanes go from memory; false while some of them are being worked (then tried again). */
  drop(partition: number): boolean;
  /**
   * Another worker holds the partition now: its lanes being worked stop, those not started are given back. Returns how
   * many were being worked (logged with the other partitions lost at once: one line, not one a partition).
   */
  onLost(partition: number): number;
  /** Partitions were taken, or a lost one dropped while held again: their backlogs are to be read. */
  onTaken(): void;
}

export interface PartitionHoldings {
  /** Renews the leases (one renewal at a time: a call meanwhile waits for the one under way). */
  renew(options?: { giveBackAll?: boolean }): Promise<void>;
  /**
   * Renews if the last renewal was sent over half the slack ago (waiting for one under way first); while renewals
   * fail, waits for the next one instead.
   */
  renewFresh(): Promise<void>;
  /** Whether the partition is held with a renewal confirmed within the slack: an attempt may start. */
  fresh(partition: number): boolean;
  /** The holdings whose backlogs are still to be read (not those lost and not dropped yet). */
  toLoad(): Holding[];
  /** Marks the holding's backlog read, unless it was given back or lost meanwhile. */
  loaded(holding: Holding): void;
  /** The partitions whose backlogs have been read: the reads after the cursor cover them. */
  covered(): number[];
  /** Of a partition held and read (a read may answer after the partition was given back or lost). */
  isCovered(partition: number): boolean;
  /**
   * A record was refused for want of the lease: another worker held the partition then, whatever the last renewal
   * said. Lost now (its lanes stop), so that if the next renewal gets it back its backlog is read afresh: what
   * this worker holds of it is stale, and a record that moved nothing on left its notification to that read.
   */
  leaseLost(partition: number): void;
  /** Every slot is held by receivers that hang (true): want no partitions, give back those not being worked. */
  slotsStuck(stuck: boolean): void;
  /** Renews now, then every RENEW_EVERY_MS until giveBackAll. */
  start(): void;
  /** Stopping: want no more partitions (the leases held are still renewed). */
  stopWanting(): void;
  /** Stops renewing and gives every partition back, telling the other workers (at stop, once every record landed). */
  giveBackAll(): Promise<void>;
}

export function createPartitionHoldings(deps: PartitionHoldingsDeps): PartitionHoldings {
  const { db, owner, leaseMs, slackMs, logger } = deps;
  // Renewed every second: during an outage each failure was a line with its stack.
  const renewals = createFailureLog(logger, {
    failed: 'webhook partition leases not renewed; trying again every second',
    stillFailing: 'webhook partition leases still not renewed',
    recovered: 'webhook partition leases renewed again',
  });
  const held = new Map<number, Holding>();
  /** Partitions lost whose lanes are still to be dropped. */
  const lost = new Set<number>();
  let fairShare = 0;
  let othersShort = false;
  let stuck = false;
  let wanting = true;
  let renewing: Promise<void> | null = null;
  /** Renew again as soon as this renewal ends (to give back at once what another worker is short of). */
  let renewAgain = false;
  /** The last renewal found this worker short of its share. */
  let wasShort = false;
  let renewSentAt = -Infinity;
  let renewTimer: NodeJS.Timeout | null = null;
  /** The last renewal failed (the database away): attempts wait for the next one rather than ask for their own. */
  let lastRenewalFailed = false;
  /** The end of the next renewal, while something waits for it (renewFresh), and what settles it. */
  let nextRenewalEnd: Promise<void> | null = null;
  let endNextRenewal = () => {};

  function renew(options: { giveBackAll?: boolean } = {}): Promise<void> {
    return (renewing ??= renewLeases(options).finally(() => {
      renewing = null;
      nextRenewalEnd = null;
      endNextRenewal();
      if (renewAgain && wanting) void renew();
      renewAgain = false;
    }));
  }

  async function renewFresh(): Promise<void> {
    if (renewing) await renewing;
    if (performance.now() - renewSentAt <= slackMs / 2) return;
    // While renewals fail, the next is the timer's: each lane asking for one of its own made a loop, as fast as the
    // database's connections were refused, of failed renewals, lanes stopped and claimed again (review: 20,000 log
    // lines a second and a core, for as long as the database was away). Waited for at most RENEWAL_WAIT_MAX_MS.
    if (lastRenewalFailed) {
      nextRenewalEnd ??= new Promise<void>((resolve) => (endNextRenewal = resolve));
      await within(nextRenewalEnd, RENEWAL_WAIT_MAX_MS).catch(() => {});
      return;
    }
    await renew();
  }

  /**
   * The partitions to give back: while the slots are stuck, all not being worked; while another worker is short of
   * its share, those over ours, not being worked. Dropped as they are chosen, so that none of their lanes is claimed
   * meanwhile.
   */
  function partitionsToGiveBack(): number[] {
    let excess = stuck ? held.size : othersShort ? held.size - fairShare : 0;
    const chosen: number[] = [];
    for (const partition of held.keys()) {
      if (excess <= 0) break;
      if (!deps.drop(partition)) continue;
      chosen.push(partition);
      excess--;
    }
    for (const partition of chosen) held.delete(partition);
    return chosen;
  }

  async function renewLeases({ giveBackAll = false }: { giveBackAll?: boolean }): Promise<void> {
    const giveBack = giveBackAll ? [...held.keys()] : partitionsToGiveBack();
    if (giveBackAll) held.clear();
    const sentAt = performance.now();
    let leases: repo.PartitionLeases;
    try {
      leases = await repo.leasePartitions(db, owner, { leaseMs, giveBack, wants: wanting && !stuck });
    } catch (err) {
      // Those given back are left to expire. The others' renewals are older now: attempts wait for a fresh one.
      renewals.failed(err);
      lastRenewalFailed = true;
      // Short again at the first renewal that lands is news to the others: told then, not at their next timer.
      wasShort = false;
      return;
    }
    renewals.succeeded();
    lastRenewalFailed = false;
    renewSentAt = sentAt;
    fairShare = leases.fairShare;
    // Newly told that another worker is short while over its share: it gives back now, not a second later
    // (review: three workers started together shared the partitions out only after two renewals, 2 s, by which
    // time a short test's work had all gone through the first; test/e2e/webhook-workers.test.ts).
    renewAgain = leases.othersShort && !othersShort && leases.partitions.length > fairShare;
    othersShort = leases.othersShort;
    const holding = new Set(leases.partitions);
    const lostNow: Lost = { partitions: [], lanes: 0 };
    for (const partition of held.keys()) if (!holding.has(partition)) partitionLost(partition, lostNow);
    let taken = 0;
    for (const partition of leases.partitions) {
      const mine = held.get(partition);
      // Held since the last renewal known to have held, unless the lease may have lapsed in between (renewals
      // failing for longer than the lease): another worker may have worked it meanwhile, so what this one holds
      // of it is stale. Lost, and taken afresh.
      if (mine && sentAt - mine.confirmedAt < leaseMs) mine.confirmedAt = sentAt;
      else {
        if (mine) partitionLost(partition, lostNow);
        held.set(partition, { partition, confirmedAt: sentAt, loaded: false });
        taken++;
      }
    }
    // A partition lost is dropped once its lanes under way have stopped; not loaded meanwhile (its lanes are
    // frozen), then loaded afresh if it was taken again.
    let retaken = false;
    for (const partition of lost) {
      if (!deps.drop(partition)) continue;
      lost.delete(partition);
      if (held.has(partition)) retaken = true;
    }
    logLost(lostNow);
    if (taken > 0) logger.info({ taken, holding: held.size }, 'webhook partitions taken');
    if (taken > 0 || retaken) deps.onTaken();
    // Newly short of its share: the others are told (the NOTIFY that partitions were given back makes them
    // renew), so that one over its share gives back now rather than at its next renewal. Once: its own NOTIFY
    // makes this worker renew too, and while still short it must not tell them again.
    const short = wanting && !stuck && held.size < fairShare;
    const newlyShort = short && !wasShort;
    wasShort = short;
    if (giveBack.length > 0 && !giveBackAll)
      logger.info({ givenBack: giveBack.length, holding: held.size }, 'webhook partitions given back');
    if ((giveBack.length > 0 && !giveBackAll) || newlyShort) {
      await repo
        .announcePartitionsFreed(db)
        .catch((err: unknown) => logger.warn({ err }, 'other workers not told of the partitions given back'));
    }
  }

  /** Another worker holds the partition now (our lease ran out): its lanes stop and are dropped. Told in `into`. */
  function partitionLost(partition: number, into: Lost): void {
    held.delete(partition);
    lost.add(partition);
    into.partitions.push(partition);
    into.lanes += deps.onLost(partition);
    if (deps.drop(partition)) lost.delete(partition);
  }

  /**
   * One line for the partitions lost at once: a worker frozen past its leases (a database hung for 30 s) logged one a
   * partition, 64 at once (probe).
   */
  function logLost({ partitions, lanes }: Lost): void {
    if (partitions.length === 0) return;
    logger.warn(
      { partitions, lanes, owner },
      'webhook partition leases lost; their lanes are left to their holders',
    );
  }

  return {
    renew,
    renewFresh,
    fresh(partition) {
      const holding = held.get(partition);
      return holding !== undefined && performance.now() - holding.confirmedAt <= slackMs;
    },
    toLoad: () => [...held.values()].filter((holding) => !holding.loaded && !lost.has(holding.partition)),
    loaded(holding) {
      if (held.get(holding.partition) === holding) holding.loaded = true;
    },
    covered: () => [...held.values()].filter((holding) => holding.loaded).map((holding) => holding.partition),
    isCovered: (partition) => held.get(partition)?.loaded === true,
    leaseLost(partition) {
      if (!held.has(partition)) return;
      const lostNow: Lost = { partitions: [], lanes: 0 };
      partitionLost(partition, lostNow);
      logLost(lostNow);
    },
    slotsStuck(value) {
      stuck = value;
    },
    start() {
      void renew();
      renewTimer = setInterval(() => void renew(), RENEW_EVERY_MS);
      renewTimer.unref();
    },
    stopWanting() {
      wanting = false;
    },
    async giveBackAll() {
      if (renewTimer) clearInterval(renewTimer);
      renewTimer = null;
      while (renewing) await renewing;
      await renew({ giveBackAll: true });
      // The other workers take them now, not at their next renewal (review: a rolling deploy's lanes waited for
      // their lease, 17 s).
      await repo
        .announcePartitionsFreed(db)
        .catch((err: unknown) => logger.warn({ err }, 'other workers not told of the partitions given back'));
    },
  };
}
