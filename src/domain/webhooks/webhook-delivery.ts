import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Config } from '../../config.ts';
import { webhookDeliveryHeaders } from '../../contract/webhook-signature.ts';
import type { WebhookPayloadType } from '../../contract/webhook-headers.ts';
import type { Clock } from '../../lib/clock.ts';
import { createDeadLetterLog } from './dead-letter-log.ts';
import { decryptSecret } from '../../lib/secret-box.ts';
import { createStore, type Db, type Store } from '../../store/database.ts';
import type { PgListener } from '../../store/pg-listener.ts';
import { laneKey, type ClaimCap, type ClaimedLane, type Lane } from './delivery-lane.ts';
import { retryDelay } from './delivery-schedule.ts';
import { createLaneBook, type ClaimedHead } from './lane-book.ts';
import { createBookReads } from './book-reads.ts';
import type { ReadNotification } from './lane-reads.repository.ts';
import type { WebhookMetrics } from './webhooks.metrics.ts';
import { createBatcher } from './statement-batcher.ts';
import * as repo from './webhooks.repository.ts';
import { createPartitionHoldings } from './partition-holdings.ts';
import { createReceiverPace } from './receiver-pace.ts';
import { slowSlots, startDispatcher, type ReadyLane } from './webhook-dispatcher.ts';
import { createWebhookSender, type AttemptResult } from './webhook-sender.ts';
import type { Log } from '../../lib/log.ts';

/**
 * The delivery side of wire-contract §5, run by every worker process (role worker or all).
 *
 * The lanes (a lane is one platform's notifications for one resource key) fall in 64 partitions, by a hash of
 * the two (migration 0026). Each worker process:
 * 1. leases partitions, a fair share of those the workers want, renewed every second (partition-holdings.ts):
 *    one worker at a time works a partition's lanes, which is what keeps per-resource order and what stops two
 *    workers from making the same attempt at once (issue 4 points 4 and 5);
 * 2. reads its partitions' undelivered notifications, a partition's backlog when it takes it, then what was
 *    recorded since, after a cursor, when a NOTIFY says something was (book-reads.ts), and keeps them in memory by
 *    lane, in order (lane-book.ts);
 * 3. works up to `SVC_WORKER_CONCURRENCY` lanes at once (webhook-dispatcher.ts), each oldest first: a failed
 *    attempt whose retry is near (the fast retries) is retried in place, holding the lane; a later retry, or the
 *    end of what was claimed, gives the lane back to the book, due again at its retry;
 * 4. records each result (the attempt, the new state) in the background, one statement for the results of all
 *    lanes at most every SETTLE_GAP_MS, while the lane goes on to its next notification: a delivery waits for the
 *    receiver, not for the bookkeeping. A lane's records are written in order (each of its statements carries
 *    every result it has made since the one before), and the lane is given back to the book once they landed.
 *
 * The lease is the request timeout + 5 s + a slack; an attempt starts only while the newest renewal known to have
 * held was sent less than the slack ago, so every attempt starts with at least the request timeout + 5 s of lease
 * left (issue 4 point 5). A worker that dies (SIGKILL) leaves its partitions to expire after that time; another
 * then takes them and reads their backlog. PostgreSQL's share of a delivery is the read (hundreds of notifications
 * a statement) and the record; the lanes table this replaced (migrations 0008-0025: a row per lane claimed,
 * renewed and released) cost it about twice that (bench/webhook-store-costs.bench.ts).
 */

/** Issue 4 point 5: a claim lasts at least the request timeout plus this. */
export const LEASE_MARGIN_MS = 5_000;
/** How old the last confirmed lease renewal may be when an attempt starts (renewed first otherwise). */
const LEASE_SLACK_MS = 2_000;
/** Retries due within this are waited for holding the lane (the fast retries); later ones release it. */
const INLINE_WAIT_MAX_MS = 1_000;
/** Notifications of a lane a claim hands to a slot; a lane with more is due again when given back. */
const HEADS_PER_LANE = 20;
/** Notifications of a lane held in memory at most; a longer lane is read in parts (lane-book.ts). */
const MAX_HEADS_PER_LANE = 2 * HEADS_PER_LANE;
/** Connections of the delivery bookkeeping (per worker process). */
const DELIVERY_POOL_SIZE = 4;
/** Most results sent in one statement. */
const BATCH_MAX = 100;
/**
 * Least time between two record statements. Nothing waits for a record but the lane's return to the book (its slot
 * is already free), so a few ms more cost nothing, while the larger batches share each statement's fixed cost
 * (about 0.5 ms of PostgreSQL's CPU): paired runs of bench/webhooks.bench.ts measured 1.05–1.18 times the
 * deliveries a second of 3 ms with 10 ms, and 0.98–1.19 times those of 10 ms with 25 ms, where a busy worker's
 * batches reach BATCH_MAX. A lane's results made meanwhile go in its next statement together (LaneRun.unsent), so
 * that one resource's deliveries are not held to one a gap (review: 40 a second). A crash loses at most these ms
 * more of records (deliveries made again): at least once holds; `delivered_at` and a retry's due time, set when
 * the record is written, are up to these ms late.
 */
const SETTLE_GAP_MS = 25;

const USER_AGENT = 'svc-platform-webhooks/0.1';

export interface WebhookDeliveryDeps {
  db: Db;
  config: Readonly<Config>;
  secretKey: Buffer;
  clock: Clock;
  metrics: WebhookMetrics;
}

export interface WebhookDelivery {
  /** The lease of a partition: the request timeout + 5 s (+ a slack, see LEASE_SLACK_MS). */
  readonly leaseMs: number;
  /**
   * Starts this process's dispatcher. Given the database URL, it does its bookkeeping on connections of its
   * own (asynchronous commit), else on `db`; given the process's LISTEN connection, it is woken by new work
   * (NOTIFY), else it polls. `stopIntake` stops claiming and starting attempts, lets the attempts under way
   * finish for up to `drainMs` (default 0), cuts short those still running then (recorded as aborted, due
   * again at once), and gives back every partition held; `close` also releases the HTTP and database
   * connections.
   */
  startWorkerSide(
    logger: Log,
    options?: { databaseUrl?: string; listener?: PgListener },
  ): { stopIntake(options?: { drainMs?: number }): Promise<void>; close(): Promise<void> };
}

/** A notification as a slot works it: as read, with whether it was due at the claim. */
type Head = ClaimedHead<ReadNotification>;

/** A lane handed to a slot: its first notifications, its partition, and its platform's endpoint as it was then. */
interface DeliveryLane extends ClaimedLane {
  heads: Head[];
  partition: number;
  endpoint: repo.EndpointView | null;
}

/** A lane's part of a record statement: its results since its last one, in order. */
interface RecordGroup {
  lane: Lane;
  results: repo.AttemptResultRecord[];
}

/** Records lanes' groups in one statement: whether each lane's partition is still held, and each result applied. */
async function recordGroups(
  db: Db,
  owner: string,
  groups: RecordGroup[],
): Promise<Array<{ leaseHeld: boolean; applied: boolean[] }>> {
  const recorded = await repo.recordAttempts(
    db,
    owner,
    groups.flatMap((group) => group.results),
  );
  let at = 0;
  return groups.map(({ results }) => {
    const own = recorded.slice(at, (at += results.length));
    return { leaseHeld: own.every((r) => r.leaseHeld), applied: own.map((r) => r.applied) };
  });
}

/**
 * The first of `unsent` that can go in one statement: up to a second result of the same notification (an
 * inline retry), which one statement would update twice.
 */
function takeSendable(unsent: repo.AttemptResultRecord[]): repo.AttemptResultRecord[] {
  const notifications = new Set<string>();
  let n = 0;
  for (const result of unsent) {
    const id = result.head.notification_id;
    if (notifications.has(id)) break;
    notifications.add(id);
    n++;
  }
  return unsent.splice(0, n);
}

/** A lane being worked: what the records of its attempts tell. */
interface LaneRun {
  lane: Lane;
  partition: number;
  /** The lane's record statements, each sent after the one before. Never rejects. */
  settled: Promise<void>;
  /** Results not sent yet: the next statement of the lane takes them. */
  unsent: repo.AttemptResultRecord[];
  /** A statement is queued on `settled` that has not taken `unsent` yet. */
  sendQueued: boolean;
  /** The partition is gone (expired, taken over) or a record failed: stop working the lane. */
  lost: boolean;
  /**
   * Lost because its lease could not be renewed (the database away): said once by the renewals' own log, not by each
   * lane stopped.
   */
  leaseUnconfirmed: boolean;
  /** An operator changed the platform's notifications or endpoint under us: stop, so it is read afresh. */
  changed: boolean;
}

export function createWebhookDelivery(deps: WebhookDeliveryDeps): WebhookDelivery {
  const { db, config, clock, metrics } = deps;
  const settings = config.webhooks;
  const leaseMs = settings.timeoutMs + LEASE_MARGIN_MS + LEASE_SLACK_MS;

  /** What an attempt's result does to the notification (wire-contract §5 "Delivery"). */
  function decide(head: Head, result: AttemptResult): repo.AttemptRecord {
    const attempt = { ...result, startedAt: new Date(result.startedAt) };
    switch (result.outcome) {
      case 'delivered':
        return {
          attempt,
          status: 'delivered',
          statusReason: null,
          roundAttempts: head.round_attempts,
          nextAttemptInMs: null,
        };
      case 'gone':
        return {
          attempt,
          status: 'dead',
          statusReason: '410 Gone',
          roundAttempts: head.round_attempts + 1,
          nextAttemptInMs: null,
        };
      case 'aborted':
        // The worker is stopping: not the receiver's fault, so no step in the schedule; due again now.
        return {
          attempt,
          status: head.attempt_count > 0 ? 'retrying' : 'pending',
          statusReason: result.error,
          roundAttempts: head.round_attempts,
          nextAttemptInMs: 0,
        };
      case 'failed': {
        const failed = head.round_attempts + 1;
        const delay = retryDelay(settings, failed);
        if (delay === null) {
          // After a redelivery (or an attempt a stopping worker aborted) the schedule is not the whole: both said (probe).
          // The attempts this round made (`failed`), not the schedule's length: a schedule shortened meanwhile
          // (configuration, restart) has fewer (review). The whole count includes attempts a stopping worker aborted.
          const total = head.attempt_count + 1;
          const counted =
            total > failed ? `${failed} attempts of its schedule (${total} in all)` : `${failed} attempts`;
          return {
            attempt,
            status: 'dead',
            statusReason: `retry schedule exhausted after ${counted}; last: ${result.error}`,
            roundAttempts: failed,
            nextAttemptInMs: null,
          };
        }
        return {
          attempt,
          status: 'retrying',
          statusReason: result.error,
          roundAttempts: failed,
          nextAttemptInMs: delay,
        };
      }
    }
  }

  function startWorkerSide(
    logger: Log,
    { databaseUrl, listener }: { databaseUrl?: string; listener?: PgListener } = {},
  ) {
    const owner = `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
    // Delivery bookkeeping (leases, reads, attempt results) commits without waiting for the WAL flush. A database
    // crash can then lose its last few milliseconds, which only ever means a redelivery (a "delivered" mark lost),
    // a retry, or a partition taken again once its lease expires: at least once holds. The notifications
    // themselves are written by the domain's own, synchronous, transactions.
    let store: Store | null = null;
    if (databaseUrl) {
      // Few connections: the statements are batched, so only a few are ever in flight at once.
      store = createStore(databaseUrl, {
        max: DELIVERY_POOL_SIZE,
        // Nor JIT: its statements are short, and a partition's load of a large backlog, costed past
        // jit_above_cost, spent tens of ms compiling (as the record function did, migration 0026).
        sessionSettings: { synchronous_commit: 'off', jit: 'off' },
      });
    }
    const bookkeeping: Db = store?.db ?? db;
    const deadLetters = createDeadLetterLog(logger);
    const sender = createWebhookSender({
      timeoutMs: settings.timeoutMs,
      slowMs: INLINE_WAIT_MAX_MS,
      now: clock.now,
    });
    const book = createLaneBook<ReadNotification>({
      headsPerLane: HEADS_PER_LANE,
      maxHeadsPerLane: MAX_HEADS_PER_LANE,
    });
    // The lanes worked at once share their record statements (statement-batcher.ts), one running at a time: under
    // load the results of many lanes go in one statement.
    const records = createBatcher({
      maxSize: BATCH_MAX,
      maxInFlight: 1,
      minGapMs: SETTLE_GAP_MS,
      key: (group: RecordGroup) => laneKey(group.lane),
      // A group carries up to HEADS_PER_LANE results: counted by its rows, a statement stays about as long as
      // when each result was an item of its own.
      weight: (group) => group.results.length,
      run: (groups) => recordGroups(bookkeeping, owner, groups),
    });
    /** Lanes whose records are still to land (awaited at stop). */
    const settling = new Set<Promise<void>>();
    /** Lanes being worked. */
    const runs = new Set<LaneRun>();

    // --- partitions (partition-holdings.ts) ---------------------------------------------------------------------

    /** Stopping: partitions freed by other workers no longer make this one renew (holdings.stopWanting). */
    let intakeStopped = false;
    const holdings = createPartitionHoldings({
      db: bookkeeping,
      owner,
      leaseMs,
      slackMs: LEASE_SLACK_MS,
      logger,
      drop: (partition) => book.dropPartition(partition),
      onLost(partition) {
        let lanes = 0;
        for (const run of runs) {
          if (run.partition !== partition) continue;
          run.lost = true;
          lanes++;
        }
        book.freezePartition(partition);
        dispatcher.refresh((ready) => ready.partition === partition);
        return lanes;
      },
      onTaken: () => reads.read(),
    });

    // --- reads (book-reads.ts) -----------------------------------------------------------------------------------

    const reads = createBookReads({
      db: bookkeeping,
      book,
      holdings,
      maxHeadsPerLane: MAX_HEADS_PER_LANE,
      maxHeld: config.webhooks.maxHeldNotifications,
      logger,
      onReordered(lanes) {
        // A lane being worked whose order changed under its slot stops before its next attempt and is claimed afresh;
        // one claimed and waiting for a slot is given back, as on an operator's change: it held the heads it was
        // claimed with, and sent a later notification before an earlier one committed late (review).
        const keys = new Set(lanes.map(laneKey));
        for (const run of runs) if (keys.has(laneKey(run.lane))) run.changed = true;
        dispatcher.refresh((ready) => keys.has(laneKey(ready.lane)));
      },
      onRead: () => dispatcher.wake(),
      // Found by a poll while the LISTEN connection was not heard (the NOTIFY lost): as if it had come.
      onEndpointsChanged: (platforms) => {
        for (const platform of platforms) refreshLanes(platform);
      },
    });

    /**
     * An operator redelivered a platform's notifications or changed its endpoint (null: any platform may have):
     * what its lanes in hand were read with may be out of date (an earlier notification pending again, another
     * URL, secret or subscription). Each of them being worked stops before its next attempt and is given back, as
     * are those claimed and not started, and none is claimed again until a read started after the change has
     * landed (with the endpoint read again). Other platforms' lanes go on. (A NOTIFY takes milliseconds: an attempt
     * already starting goes out.)
     */
    function refreshLanes(platformCode: string | null): void {
      reads.platformChanged(platformCode);
      // A new URL may answer in time: found out again by its first attempts.
      if (platformCode !== null) pace.forget(platformCode);
      const concerns = (lane: Lane) => platformCode === null || lane.platformCode === platformCode;
      let lanes = 0;
      for (const run of runs) {
        if (!concerns(run.lane)) continue;
        run.changed = true;
        lanes++;
      }
      dispatcher.refresh((ready) => concerns(ready.lane));
      if (platformCode !== null)
        logger.info({ platformCode, lanes }, 'webhook lanes read afresh after an operator change');
      else if (lanes > 0)
        logger.info({ lanes }, 'webhook lanes read afresh after the wake-up connection was restored');
    }

    function claimLanes(limit: number, capped: ClaimCap | null): DeliveryLane[] {
      const paused = reads.paused();
      if (paused.all) return [];
      const claimed = book.claim(limit, capped, paused.platforms);
      return claimed.map(({ lane, partition, heads }) => ({
        lane,
        partition,
        heads,
        endpoint: reads.endpointOf(lane.platformCode),
      }));
    }

    // --- attempts and records ---------------------------------------------------------------------------------

    // Decrypted secrets by ciphertext: a changed secret is a new ciphertext (fresh IV), so an entry never goes
    // stale; the map is only bounded. Decrypting per delivery was ~4 % of a worker's CPU.
    const secrets = new Map<string, string>();
    function secretOf(sealed: string | null): string | null {
      if (!sealed) return null;
      let secret = secrets.get(sealed);
      if (secret === undefined) {
        // Emptied whole when full: past 1,000 platforms delivering at once, least-recently-used eviction would miss
        // as often (deliveries go round the platforms), and below it nothing is evicted either way.
        if (secrets.size >= 1_000) secrets.clear();
        secret = decryptSecret(deps.secretKey, Buffer.from(sealed, 'base64'));
        secrets.set(sealed, secret);
      }
      return secret;
    }

    /**
     * Queues a record of the result behind the lane's earlier ones; the lane's next statement takes every result
     * queued by the time it is sent.
     */
    function settle(run: LaneRun, result: repo.AttemptResultRecord): void {
      run.unsent.push(result);
      queueSend(run);
    }

    /**
     * Resolves once every statement of the lane has been answered, those queued meanwhile included: a statement
     * may queue one more (sendUnsent: a second result of one notification), which awaiting `settled` once
     * missed, so that a stop closed the connections before the lane's last record was written (review).
     */
    async function allSettled(run: LaneRun): Promise<void> {
      for (let tail = run.settled; ; tail = run.settled) {
        await tail;
        if (tail === run.settled) return;
      }
    }

    function queueSend(run: LaneRun): void {
      if (run.sendQueued) return;
      run.sendQueued = true;
      run.settled = run.settled.then(() => sendUnsent(run));
    }

    async function sendUnsent(run: LaneRun): Promise<void> {
      run.sendQueued = false;
      const results = takeSendable(run.unsent);
      // What takeSendable left (a second result of one notification) goes in the statement after.
      if (run.unsent.length > 0) queueSend(run);
      if (results.length === 0) return;
      try {
        const recorded = await records.call({ lane: run.lane, results });
        results.forEach((result, i) => {
          const { status, attempt, nextAttemptInMs, roundAttempts } = result.record;
          const applied = recorded.applied[i]!;
          const again = status === 'retrying' || status === 'pending';
          // The book follows the record: a notification done leaves it, one to retry gets its new state and time.
          // One whose record did not apply (an operator's redelivery came first) leaves it too: the reads bring
          // its new state.
          book.settled(
            run.lane,
            result.head.notification_id,
            result.head.state_token,
            applied && again
              ? {
                  update: {
                    state_token: result.newStateToken,
                    round_attempts: roundAttempts,
                    attempt_count: result.head.attempt_count + (attempt ? 1 : 0),
                  },
                  waitMs: nextAttemptInMs ?? 0,
                }
              : null,
            // Not applied with the lease held: a redelivery moved it to a new token. Not applied without the
            // lease: the database kept it on this one, for whoever holds the partition next.
            applied || recorded.leaseHeld,
          );
          if (!applied) {
            // An operator's redelivery came first: the platform's lanes wait for a read begun now, which brings
            // its new state, so that the lane is not claimed again without it (e.g. without a LISTEN connection).
            run.changed = true;
            reads.pauseUntilRead(run.lane.platformCode);
            return;
          }
          if (status === 'delivered' && attempt) {
            // From the attempt's end, not the record's: the record may be written up to SETTLE_GAP_MS later.
            const endedMs = attempt.startedAt.getTime() + attempt.durationMs;
            metrics.observeDelivered((endedMs - result.head.round_started_ms) / 1000);
          }
          if (status === 'dead') {
            metrics.deadLettered();
            deadLetters.tell({
              platformCode: run.lane.platformCode,
              notificationId: result.head.notification_id,
              payloadType: result.head.payload_type,
              reason: result.record.statusReason,
            });
          }
        });
        if (!recorded.leaseHeld) {
          run.lost = true;
          holdings.leaseLost(run.partition);
        }
      } catch (err) {
        // The attempts were made but are not recorded: the notifications stay as they were, and are attempted
        // again (at least once). Stop working the lane, and let go of its partition as for a lost lease: left in
        // the book, the lane was due again at once, claimed and attempted every few ms while the database was away
        // (review: 70 requests in 1.8 s to a receiver answering 500, 2xx answers sent again). The partition is
        // read afresh when it is taken again, by this worker or another, once the database answers.
        run.lost = true;
        logger.error({ err, lane: run.lane }, 'webhook attempts could not be recorded');
        holdings.leaseLost(run.partition);
      }
    }

    /** Whether the partition's lease is known to have at least the request timeout + 5 s left (the usual case). */
    function leaseFresh(run: LaneRun): boolean {
      return !run.lost && holdings.fresh(run.partition);
    }

    /** As leaseFresh, renewing the lease if it is not (then the lane stops if it did not hold). */
    async function leaseRenewed(run: LaneRun): Promise<boolean> {
      if (run.lost) return false;
      await holdings.renewFresh();
      if (leaseFresh(run)) return true;
      // Unless something else ended it meanwhile (its partition lost, a record failed), which is said as such.
      if (!run.lost) run.leaseUnconfirmed = true;
      run.lost = true;
      return false;
    }

    // Receivers that take over a second (the threshold past which a failed attempt's lane is given back rather
    // than holding its slot for the fast retries) share at most half of the slots (webhook-dispatcher.ts).
    const pace = createReceiverPace({
      slowMs: INLINE_WAIT_MAX_MS,
      onChange(platformCode, slow) {
        const slots = slowSlots(config.worker.concurrency);
        if (slow)
          logger.warn(
            { platformCode, slots },
            "webhook receiver slow (an attempt took over a second): its lanes share at most these slots of this worker while other platforms' lanes wait",
          );
        else
          logger.info(
            { platformCode },
            'webhook receiver no longer counted as slow (answered in time with none late for 10 s, none late for a minute, or its webhook changed)',
          );
      },
    });
    metrics.trackSlowReceivers(() => pace.slowPlatforms().length);
    metrics.trackHeldNotifications(() => book.size().heads);

    /**
     * Attempts (or skips) one notification; what happens to it. `onSlow` is called once the attempt has run for
     * INLINE_WAIT_MAX_MS without its answer.
     */
    async function attempt(
      lane: DeliveryLane,
      head: Head,
      onSlow: () => boolean,
    ): Promise<repo.AttemptRecord> {
      const { endpoint } = lane;
      const skip = repo.skipReason(endpoint ?? undefined, head.payload_type);
      if (skip !== null || !endpoint) {
        // The platform's webhook was removed, disabled or unsubscribed from this type since it was recorded.
        return {
          attempt: null,
          status: 'skipped',
          statusReason: skip ?? 'no webhook configured',
          roundAttempts: head.round_attempts,
          nextAttemptInMs: null,
        };
      }
      const rawBody = head.body;
      const headers = webhookDeliveryHeaders({
        payloadType: head.payload_type as WebhookPayloadType,
        notificationId: head.notification_id,
        timestampMs: clock.now(),
        rawBody,
        secret: secretOf(endpoint.sealedSecret),
      });
      headers['user-agent'] = USER_AGENT;
      const ended = pace.started(lane.lane.platformCode);
      let result: AttemptResult | undefined;
      try {
        result = await sender.send({ url: endpoint.url, rawBody, headers, onSlow });
      } finally {
        // (send does not throw; were it to, the attempt would still end here, not count as running forever)
        ended(result?.durationMs ?? 0);
      }
      metrics.observeAttempt(result.outcome, result.durationMs / 1000);
      return decide(head, result);
    }

    /**
     * Works a claimed lane oldest first until it is done, waits for a later retry, or must stop. Resolves when its
     * last attempt is made: the slot is then free, while the records go on (tracked in `settling`), after which
     * the lane goes back to the book. An attempt that runs late parks the lane (webhook-dispatcher.ts), freeing
     * its slot; the lane then stops after that attempt, given back to be claimed within the slow receivers' share.
     */
    async function workLane(
      claimed: ReadyLane<DeliveryLane>,
      signal: AbortSignal,
      park: () => boolean,
    ): Promise<void> {
      const run: LaneRun = {
        lane: claimed.lane,
        partition: claimed.partition,
        settled: Promise.resolve(),
        unsent: [],
        sendQueued: false,
        lost: false,
        leaseUnconfirmed: false,
        changed: false,
      };
      const { heads } = claimed;
      let parked = false;
      // Asked again at each sweep while refused (a bound of parked lanes reached), until it is parked.
      const onSlow = (): boolean => (parked = park());
      runs.add(run);
      try {
        let i = 0;
        let head = heads[0];
        while (head) {
          if (signal.aborted || run.changed) break;
          // wait_ms was measured at the claim; time has passed since.
          const waitMs = head.due ? 0 : head.wait_ms - (performance.now() - claimed.claimSentAt);
          if (waitMs > 0) {
            // A retry later than the fast ones: give the lane back; it is due again at that time.
            if (waitMs > INLINE_WAIT_MAX_MS) break;
            await sleep(waitMs, undefined, { signal }).catch(() => {});
            if (signal.aborted) break;
          }
          // Checked without an await first: one per delivery was a promise and a turn of the microtask queue.
          if (!leaseFresh(run) && !(await leaseRenewed(run))) break;
          // The renewal may have taken a while: the worker may be stopping, or the lane changed, meanwhile.
          if (signal.aborted || run.changed) break;
          const outcome = await attempt(claimed, head, onSlow);
          const newStateToken = randomUUID();
          const again = outcome.status === 'retrying' || outcome.status === 'pending';
          settle(run, { head, newStateToken, record: outcome });
          // A retry is waited for in place only when the lane holds its slot for little longer that way: after
          // a failure that itself took long (a timeout, a slow error), the lane is given back, due at the retry,
          // so that a platform whose receiver hangs does not keep the slots from every other one for its whole
          // round of fast retries (review: 50-110 s).
          const retryLater =
            again &&
            ((outcome.nextAttemptInMs ?? 0) > INLINE_WAIT_MAX_MS ||
              (outcome.attempt?.durationMs ?? 0) > INLINE_WAIT_MAX_MS);
          if (retryLater || parked) break;
          head = again
            ? {
                ...head,
                state_token: newStateToken,
                round_attempts: outcome.roundAttempts,
                attempt_count: head.attempt_count + (outcome.attempt ? 1 : 0),
                due: outcome.nextAttemptInMs === 0,
                wait_ms: (outcome.nextAttemptInMs ?? 0) + (performance.now() - claimed.claimSentAt),
              }
            : heads[++i];
        }
      } finally {
        runs.delete(run);
        const done = allSettled(run).then(() => {
          if (run.lost && !run.leaseUnconfirmed)
            logger.warn(
              { lane: run.lane, owner },
              'webhook lane stopped: its partition or its records were lost',
            );
          // The book may have more of it due now (read meanwhile), or soon (a retry): the dispatcher looks again.
          // Not for a lane worked through (the usual case), which leaves nothing new: waking the dispatcher for each
          // delivery cost a claim, a next-due look and an idle timer set and cleared (worker CPU).
          if (book.release(run.lane) && !signal.aborted) dispatcher.wake();
          reads.readIfWanted();
          settling.delete(done);
        });
        settling.add(done);
      }
    }

    const dispatcher = startDispatcher<DeliveryLane>({
      concurrency: config.worker.concurrency,
      pollIntervalMs: config.worker.pollIntervalMs,
      pace,
      claim: async (limit, capped) => claimLanes(limit, capped),
      work: workLane,
      release: async (lanes) => {
        for (const lane of lanes) book.release(lane.lane);
      },
      nextDueInMs: async (excluded) => {
        const paused = reads.paused();
        return paused.all ? null : book.nextDueInMs([...excluded, ...(paused.platforms ?? [])]);
      },
      onError: (err, message) => logger.error({ err }, message),
      // A slot is free (a lane ended or was parked): the worker wants partitions again, if it had given them up. From
      // the dispatcher, which knows: a parked lane that ended freed no slot, and one parked freed one (review).
      onSlotFreed: () => holdings.slotsStuck(false),
      onSlotsStuck: (lanes) => {
        logger.warn(
          { lanes, slots: config.worker.concurrency },
          'every webhook slot taken for over a second (receivers that hang?): partitions not being worked given back to other workers',
        );
        holdings.slotsStuck(true);
        void holdings.renew();
      },
    });
    listener
      ?.listen(repo.LANES_CHANNEL, {
        onMessage: (payload) => {
          if (payload === repo.PARTITIONS_FREED) {
            if (!intakeStopped) void holdings.renew();
            return;
          }
          const changed = repo.changedPlatform(payload);
          if (changed !== null) refreshLanes(changed);
          else reads.read();
        },
        // Notifications may have been missed while disconnected: look for work.
        onConnected: () => reads.read(),
        // And an operator's change may have been missed: the lanes in hand are read afresh.
        onReconnected: () => refreshLanes(null),
      })
      .catch((err: unknown) => logger.error({ err }, 'webhook wake-ups not listened for; polling only'));

    holdings.start();
    // In case a wake-up was lost. While no LISTEN connection is heard from (none, or one that is down or silent),
    // an operator's change of an endpoint may be missed: the endpoints are read again at each poll too. Only at a
    // reconnection, a worker whose LISTEN connection stayed down sent its lanes to the old URL, with the old
    // secret, or to a disabled webhook, for as long as it was down (review).
    const pollTimer = setInterval(() => {
      if (!listener?.hearing()) reads.endpointsStale();
      reads.read();
    }, config.worker.pollIntervalMs);
    pollTimer.unref();

    let stopped: Promise<void> | null = null;
    const stopIntake = ({ drainMs = 0 }: { drainMs?: number } = {}) =>
      (stopped ??= (async () => {
        // The dispatcher stops claiming and its lanes stop before their next attempt, at once. The attempts
        // under way may finish within drainMs (DESIGN §6: a stopping instance finishes its in-flight work),
        // so that a restart does not send again what a receiver is answering; those still running then are
        // cut short.
        intakeStopped = true;
        holdings.stopWanting();
        const lanesStopped = dispatcher.stop();
        logger.info(
          { lanes: runs.size, drainMs },
          'webhook delivery stopping; attempts under way may finish',
        );
        const cut = setTimeout(() => sender.abortAll(), drainMs);
        // Meanwhile, not first: a LISTEN connection gone silent answers only at its heartbeat timeout, and
        // the dispatcher would go on claiming and starting attempts until then.
        const unlistened = listener?.unlisten(repo.LANES_CHANNEL);
        try {
          await lanesStopped;
        } finally {
          clearTimeout(cut);
        }
        clearInterval(pollTimer);
        // The leases are renewed until every record has landed (a record applies only while its partition is held),
        // then given back; given back too if the wait fails, rather than renewed until the process exits.
        try {
          await Promise.all([...settling, unlistened, reads.stop()]);
        } finally {
          // The dead letters counted and not yet told (their platform's quiet minute not over) are told now.
          deadLetters.flush();
          await holdings.giveBackAll();
        }
      })());
    let closed: Promise<void> | null = null;
    return {
      stopIntake,
      // Once, like the stop: a second close waits for the first rather than closing what it closed.
      close: () =>
        (closed ??= (async () => {
          // The connections are closed even when the stop failed (its failure still reaches the caller).
          try {
            await stopIntake();
          } finally {
            await sender.close();
            await store?.close();
          }
        })()),
    };
  }

  return { leaseMs, startWorkerSide };
}
