import type { Db } from '../../store/database.ts';
import type { Lane } from './delivery-lane.ts';
import type { LaneBook } from './lane-book.ts';
import {
  loadPartitions,
  readAfter,
  readLanes,
  type ReadCursor,
  type ReadNotification,
} from './lane-reads.repository.ts';
import type { PartitionHoldings } from './partition-holdings.ts';
import * as repo from './webhooks.repository.ts';
import { createFailureLog } from '../../lib/failure-log.ts';
import type { Log } from '../../lib/log.ts';

/**
 * What keeps a worker's lane book filled from the database (webhook-delivery.ts step 2): the backlog of each
 * partition it takes, what was recorded since (after a cursor), and the next part of lanes the book held only the
 * start of (lane-reads.repository.ts); each platform's endpoint, read before any of its notifications is taken in;
 * and the platforms an operator changed, which are not claimed until a read started after the change has landed.
 * One read runs at a time; a call meanwhile makes it read again once it ends.
 */

/** Notifications a read after the cursor takes; reads follow one another while they come back full. */
const READ_LIMIT = 500;
/** Partitions whose backlogs one statement loads (see readLoop). */
const LOAD_PARTITIONS = 4;
/** Lanes one refill statement reads. */
const REFILL_LANES = 100;
/** After a failed read (a connection lost, the database restarting), the wait before the next. */
const READ_RETRY_MS = 1_000;

export interface BookReadsDeps {
  /** The delivery bookkeeping's connections. */
  db: Db;
  book: LaneBook<ReadNotification>;
  holdings: PartitionHoldings;
  /** Notifications of a lane the book holds at most. */
  maxHeadsPerLane: number;
  /**
   * Notifications held in memory past which the lanes waiting for a retry are trimmed to their first (lane-book.ts
   * `trim`), down to half; if that is not enough (more lanes than this wait), no more are read after the cursor
   * until the slots have worked through half. Lanes already held keep being refilled.
   */
  maxHeld: number;
  logger: Log;
  /** TESTS ONLY: the wait after a failed read (READ_RETRY_MS). */
  readRetryMs?: number;
  /** Lanes whose order changed under them (an earlier notification committed late, a new state): stop before their next attempt. */
  onReordered(lanes: Lane[]): void;
  /** The book has taken something in: lanes may be due. */
  onRead(): void;
  /**
   * Endpoints read again because nothing would have said they changed (`endpointsStale`) that differ from what
   * was read before: the lanes in hand of those platforms were claimed with the old ones.
   */
  onEndpointsChanged(platforms: string[]): void;
}

export interface BookReads {
  /** Reads now, or again once the read under way ends. */
  read(): void;
  /** Reads if the book wants a lane refilled, or if the reads were held back at the bound and the slots have worked through half. */
  readIfWanted(): void;
  /**
   * The platform's lanes (null: every platform's) are not claimed until a read started after now has landed (what
   * they were read with may be out of date). Reads.
   */
  pauseUntilRead(platformCode: string | null): void;
  /**
   * An operator changed a platform's notifications or endpoint (null: any platform may have, after the LISTEN
   * connection was lost): as pauseUntilRead, with its endpoint read again.
   */
  platformChanged(platformCode: string | null): void;
  /**
   * Reads the endpoints again at the next read (without a LISTEN connection heard, nothing says when they change),
   * and tells `onEndpointsChanged` of those that changed.
   */
  endpointsStale(): void;
  /** The platform's endpoint as last read (null: none). */
  endpointOf(platformCode: string): repo.EndpointView | null;
  /** The platforms not to claim now (pauseUntilRead), undefined for none; `all`: no platform may be claimed. */
  paused(): { all: boolean; platforms: ReadonlySet<string> | undefined };
  /** Stops reading (the connections are about to close) and waits for the read under way. */
  stop(): Promise<void>;
}

export function createBookReads(deps: BookReadsDeps): BookReads {
  const { db, book, holdings, maxHeld, maxHeadsPerLane, logger } = deps;
  let cursor: ReadCursor | null = null;
  let reading: Promise<void> | null = null;
  let readAgain = false;
  let readsStarted = 0;
  let stopped = false;
  const readRetryMs = deps.readRetryMs ?? READ_RETRY_MS;
  /** Set after a failed read: the next read waits for it, whoever asks (see read()). */
  let retryTimer: NodeJS.Timeout | null = null;
  const failures = createFailureLog(logger, {
    failed: 'webhook notifications not read; trying again',
    stillFailing: 'webhook notifications still not read',
    recovered: 'webhook notifications read again',
  });
  /** The cursor stopped at maxHeld: read again once the slots have worked through half. */
  let heldBack = false;
  /** Each platform's endpoint (null: none), read before any of its notifications is taken in. */
  const endpoints = new Map<string, repo.EndpointView | null>();
  /** Endpoints to read again (an operator changed them); all of them after the LISTEN connection was lost. */
  const staleEndpoints = new Set<string>();
  let allEndpointsStale = false;
  /** The next read of the endpoints is the poll's (endpointsStale): changes found are told. */
  let lookForChanges = false;
  /** Platforms not claimed until a read started after the change has landed: by the mark, the reads started before it. */
  const pausedPlatforms = new Map<string, number>();
  /** Every platform (after the LISTEN connection was lost), by the same mark. */
  let pausedAll: number | null = null;

  function read(): void {
    if (stopped) return;
    // After a failure every read waits for the retry, which reads all there is: during an outage the wake-ups,
    // the poll, the slots and the holdings each started one at once, six failed reads a second, each logged with
    // its stack (review).
    if (retryTimer) return;
    if (reading) {
      readAgain = true;
      return;
    }
    reading = readLoop()
      .then(failures.succeeded, (err: unknown) => {
        failures.failed(err, { retryInMs: readRetryMs });
        readAgain = false;
        retryTimer = setTimeout(() => {
          retryTimer = null;
          read();
        }, readRetryMs);
        retryTimer.unref();
      })
      .finally(() => {
        reading = null;
        if (readAgain) read();
      });
  }

  async function readLoop(): Promise<void> {
    do {
      readAgain = false;
      const started = ++readsStarted;
      await readStaleEndpoints();
      // Of the holdings as they are now: one given back and taken again meanwhile is a new holding, loaded afresh.
      const toLoad = holdings.toLoad();
      heldBack = false;
      // A few partitions a statement, each trimmed to the bound before the next: a worker that takes partitions
      // during a long outage of a big platform's receiver does not hold all their backlogs at once. Past the bound
      // (more lanes due than it holds), the rest wait, as the reads after the cursor do.
      for (let i = 0; i < toLoad.length && withinBound(); i += LOAD_PARTITIONS) {
        const part = toLoad.slice(i, i + LOAD_PARTITIONS);
        const partitions = part.map((holding) => holding.partition);
        // One more than the book holds of a lane: it then knows the lane has more.
        const loaded = await loadPartitions(db, partitions, maxHeadsPerLane + 1);
        // Nothing is marked read before all that the rows need is: a failure here reads them again.
        await readEndpointsOf(loaded.rows);
        cursor ??= loaded.cursor;
        for (const holding of part) holdings.loaded(holding);
        takeIn(loaded.rows);
        deps.onRead();
      }
      const covered = holdings.covered();
      while (!heldBack && cursor && covered.length > 0 && withinBound()) {
        const next = await readAfter(db, covered, cursor, READ_LIMIT);
        await readEndpointsOf(next.rows);
        cursor = next.cursor;
        takeIn(next.rows);
        if (next.rows.length < READ_LIMIT) break;
      }
      const wanted = book.wantsRefill();
      for (let i = 0; i < wanted.length; i += REFILL_LANES) {
        const answers = await readLanes(db, wanted.slice(i, i + REFILL_LANES), maxHeadsPerLane);
        await readEndpointsOf(answers.flatMap((answer) => answer.rows));
        for (const answer of answers)
          book.refilled(answer.lane, answer.rows.filter(isCovered), answer.complete, answer.afterSeq);
      }
      for (const [platform, mark] of pausedPlatforms) if (mark < started) pausedPlatforms.delete(platform);
      if (pausedAll !== null && pausedAll < started) pausedAll = null;
      deps.onRead();
      // Stopping: a read asked for meanwhile is not made (the connections are about to close).
    } while (readAgain && !stopped);
  }

  /**
   * Whether fewer than maxHeld notifications are held, once the lanes waiting for a retry (a receiver down) have
   * been trimmed to their first, if there were that many; if not, the reads are held back.
   */
  function withinBound(): boolean {
    if (book.size().heads >= maxHeld) {
      const letGo = book.trim(Math.floor(maxHeld / 2));
      if (letGo > 0)
        logger.info(
          { letGo, held: book.size().heads },
          'webhook notifications held in memory past their bound: those after the first of lanes waiting for a retry let go, to be read again when due',
        );
    }
    heldBack = book.size().heads >= maxHeld;
    return !heldBack;
  }

  /** Of a partition held and read (a read may answer after the partition was given back or lost). */
  const isCovered = (row: ReadNotification) => holdings.isCovered(row.lane_partition);

  /** Reads the endpoints of the rows' platforms not known yet: a lane is claimed with its platform's endpoint. */
  async function readEndpointsOf(rows: ReadNotification[]): Promise<void> {
    const unknown = new Set<string>();
    for (const row of rows) if (!endpoints.has(row.platform_code)) unknown.add(row.platform_code);
    if (unknown.size > 0) await fetchEndpoints([...unknown]);
  }

  /**
   * Reads `platforms`' endpoints (null: those of every platform known) into `endpoints`; null for none. Returns the
   * platforms known before whose endpoint is not the same now.
   */
  async function fetchEndpoints(platforms: string[] | null): Promise<string[]> {
    const asked = platforms ?? [...endpoints.keys()];
    if (asked.length === 0) return [];
    const found = await repo.readEndpoints(db, asked);
    const changed: string[] = [];
    for (const platform of asked) {
      const now = found.get(platform) ?? null;
      const before = endpoints.get(platform);
      if (before !== undefined && !sameEndpoint(before, now)) changed.push(platform);
      endpoints.set(platform, now);
    }
    return changed;
  }

  /** Reads again the endpoints an operator changed (all of them after the LISTEN connection was lost, or at a poll). */
  async function readStaleEndpoints(): Promise<void> {
    if (!allEndpointsStale && staleEndpoints.size === 0) return;
    const platforms = allEndpointsStale ? null : [...staleEndpoints];
    const told = lookForChanges;
    allEndpointsStale = false;
    lookForChanges = false;
    staleEndpoints.clear();
    let changed: string[];
    try {
      changed = await fetchEndpoints(platforms);
    } catch (err) {
      // Still to be read: the retry's read reads them (review: the marks were lost with the failed read, and the
      // platform's lanes, unpaused by the retry, were claimed with the old URL and secret).
      if (platforms === null) allEndpointsStale = true;
      else for (const platform of platforms) staleEndpoints.add(platform);
      lookForChanges ||= told;
      throw err;
    }
    if (told && changed.length > 0) deps.onEndpointsChanged(changed);
  }

  /** Adds rows to the book (their endpoints read); lanes whose order changed under their slot are told. */
  function takeIn(rows: ReadNotification[]): void {
    if (rows.length === 0) return;
    const reordered = book.add(rows.filter(isCovered));
    if (reordered.length > 0) deps.onReordered(reordered);
  }

  function pauseUntilRead(platformCode: string | null): void {
    if (platformCode === null) pausedAll = readsStarted;
    else pausedPlatforms.set(platformCode, readsStarted);
    read();
  }

  return {
    read,
    readIfWanted() {
      if ((heldBack && book.size().heads < maxHeld / 2) || book.needsRefill()) read();
    },
    pauseUntilRead,
    platformChanged(platformCode) {
      if (platformCode === null) allEndpointsStale = true;
      else staleEndpoints.add(platformCode);
      pauseUntilRead(platformCode);
    },
    endpointsStale() {
      allEndpointsStale = true;
      lookForChanges = true;
    },
    endpointOf: (platformCode) => endpoints.get(platformCode) ?? null,
    paused: () => ({
      all: pausedAll !== null,
      platforms: pausedPlatforms.size > 0 ? new Set(pausedPlatforms.keys()) : undefined,
    }),
    async stop() {
      stopped = true;
      if (retryTimer) clearTimeout(retryTimer);
      retryTimer = null;
      await reading;
    },
  };
}

function sameEndpoint(a: repo.EndpointView | null, b: repo.EndpointView | null): boolean {
  if (a === null || b === null) return a === b;
  return (
    a.url === b.url &&
    a.sealedSecret === b.sealedSecret &&
    a.enabled === b.enabled &&
    JSON.stringify(a.payloadTypes) === JSON.stringify(b.payloadTypes)
  );
}
