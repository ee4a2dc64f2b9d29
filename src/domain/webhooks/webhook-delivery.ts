import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Config } from '../../config.ts';
import { webhookDeliveryHeaders } from '../../contract/webhook-signature.ts';
import type { WebhookPayloadType } from '../../contract/webhook-headers.ts';
import type { Clock } from '../../lib/clock.ts';
import { decryptSecret } from '../../lib/secret-box.ts';
import { createStore, type Db, type Store } from '../../store/database.ts';
import type { PgListener } from '../../store/pg-listener.ts';
import { laneKey, type Lane } from './delivery-lane.ts';
import { attemptsPerRound, retryDelay } from './delivery-schedule.ts';
import type { WebhookMetrics } from './webhooks.metrics.ts';
import { createBatcher } from './statement-batcher.ts';
import * as repo from './webhooks.repository.ts';
import { createReceiverPace } from './receiver-pace.ts';
import { slowSlots, startDispatcher, type ReadyLane } from './webhook-dispatcher.ts';
import { createWebhookSender, type AttemptResult } from './webhook-sender.ts';

/**
 * The delivery side of wire-contract §5, run by every worker process (role worker or all).
 *
 * Each worker process runs one dispatcher (`webhook-dispatcher.ts`) that claims due lanes, many per
 * statement, and works up to `SVC_WORKER_CONCURRENCY` of them at once. A lane is one platform's
 * notifications for one resource key; working one (`workLane`, below):
 * 1. the claim gave this process the lane's lease (`webhook_lanes.owner`, with an expiry), so one worker at
 *    a time works a lane: this is what keeps per-resource order and what stops two workers from making the
 *    same attempt at once (issue 4 points 4 and 5); it also gave the lane's oldest undelivered notifications;
 * 2. they are attempted oldest first; a failed attempt whose retry is near (the fast retries) is retried in
 *    place, holding the lane; a later retry, or the end of what was claimed, gives the lane back;
 * 3. each result is recorded (the attempt, the new state, the lease renewed if due) in the background, one
 *    statement for the results of all lanes at most every SETTLE_GAP_MS, while the lane goes on to its next
 *    notification: a delivery waits for the receiver, not for the bookkeeping. A lane's records are written
 *    in order: each of its statements carries every result it has made since the one before;
 * 4. giving the lane back (webhook_release_lanes) waits for its records, then deletes the lane row if it
 *    is empty or leaves it due when its head is.
 *
 * The lease is the request timeout + 5 s + a slack, renewed by records once half the slack has passed; an attempt starts only while
 * the newest renewal known to have held was sent less than the slack ago, so every attempt starts with at
 * least the request timeout + 5 s of lease left (issue 4 point 5). A worker that dies (SIGKILL) leaves its
 * lanes to expire after that time; the lane row is then due and any dispatcher claims it.
 */

/** Issue 4 point 5: a claim lasts at least the request timeout plus this. */
export const LEASE_MARGIN_MS = 5_000;
/** How old the last confirmed lease renewal may be when an attempt starts (renewed first otherwise). */
const LEASE_SLACK_MS = 2_000;
/** Retries due within this are waited for holding the lane (the fast retries); later ones release it. */
const INLINE_WAIT_MAX_MS = 1_000;
/** Notifications of a lane a claim takes; a lane with more is due again when given back. */
const HEADS_PER_LANE = 20;
/** Connections of the delivery bookkeeping (per worker process). */
const DELIVERY_POOL_SIZE = 4;
/** Most lane operations sent in one statement (a lane's results count one each). */
const BATCH_MAX = 100;
/**
 * Least time between two settle statements. Nothing waits for a settle but the lane's release (its slot is
 * already free) and, once a second, a lease renewal, so a few ms more cost nothing, while the larger batches
 * share each statement's fixed cost (about 0.5 ms of PostgreSQL's CPU, against 45 µs per item): paired runs
 * of bench/webhooks.bench.ts measured 1.05–1.18 times the deliveries a second of 3 ms with 10 ms, and
 * 0.98–1.19 times those of 10 ms with 25 ms, where a busy worker's batches reach BATCH_MAX. A lane's results
 * made meanwhile go in its next statement together (LaneRun.unsent), so that one resource's deliveries are not
 * held to one a gap (review: 40 a second). A crash loses at most these ms more of records (deliveries made
 * again): at least once holds; `delivered_at` and a retry's due time, set when the record is written, are up to
 * these ms late.
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

export interface LaneLogger {
  warn(obj: object, message: string): void;
  info(obj: object, message: string): void;
  error(obj: object, message: string): void;
}

export interface WebhookDelivery {
  /** The lease a claim takes: the request timeout + 5 s (+ a slack, see LEASE_SLACK_MS). */
  readonly leaseMs: number;
  /**
   * Starts this process's dispatcher. Given the database URL, it does its bookkeeping on connections of its
   * own (asynchronous commit), else on `db`; given the process's LISTEN connection, it is woken by new work
   * (NOTIFY), else it polls. `stopIntake` stops claiming and starting attempts, lets the attempts under way
   * finish for up to `drainMs` (default 0), cuts short those still running then (recorded as aborted, due
   * again at once), and gives back every lane held; `close` also releases the HTTP and database connections.
   */
  startWorkerSide(
    logger: LaneLogger,
    options?: { databaseUrl?: string; listener?: PgListener },
  ): { stopIntake(options?: { drainMs?: number }): Promise<void>; close(): Promise<void> };
}

interface UnsentSettle {
  result: repo.AttemptResultRecord | null;
  release: boolean;
}

/** A lane's part of a settle statement: its results since its last one, in order (settleGroups). */
interface SettleGroup {
  lane: Lane;
  results: repo.AttemptResultRecord[];
  renew: boolean;
  release: boolean;
}

/**
 * Settles lanes' groups in one statement (webhooks.repository.ts settleLanes takes one item per result): whether
 * each lane's lease held, and whether each result applied.
 */
async function settleGroups(
  db: Db,
  owner: string,
  leaseMs: number,
  groups: SettleGroup[],
): Promise<Array<{ leaseHeld: boolean; applied: boolean[] }>> {
  const items: repo.SettleItem[] = [];
  for (const { lane, results, renew, release } of groups) {
    if (results.length === 0) items.push({ lane, result: null, renew, release });
    // The renewal with the first result, the release with the last (webhook_settle_lanes releases after
    // recording every item).
    results.forEach((result, i) =>
      items.push({ lane, result, renew: renew && i === 0, release: release && i === results.length - 1 }),
    );
  }
  const settled = await repo.settleLanes(db, owner, leaseMs, items);
  let at = 0;
  return groups.map(({ results }) => {
    const own = settled.slice(at, (at += Math.max(1, results.length)));
    return { leaseHeld: own[0]!.leaseHeld, applied: results.map((_, i) => own[i]!.applied) };
  });
}

/**
 * The first of `unsent` that can go in one statement: up to a second result of the same notification (an
 * inline retry), which one statement would update twice.
 */
function takeSendable(unsent: UnsentSettle[]): UnsentSettle[] {
  const notifications = new Set<string>();
  let n = 0;
  for (const { result } of unsent) {
    const id = result?.head.notification_id;
    if (id !== undefined && notifications.has(id)) break;
    if (id !== undefined) notifications.add(id);
    n++;
  }
  return unsent.splice(0, n);
}

/** A lane being worked: what the records of its attempts tell about its lease and its state. */
interface LaneRun {
  lane: Lane;
  /** performance.now() when the newest lease renewal known to have held was sent (the claim, a record). */
  confirmedAt: number;
  /** The lane's settle statements, each sent after the one before. Never rejects. */
  settled: Promise<void>;
  /** Results (and the release) not sent yet: the next statement of the lane takes them. */
  unsent: UnsentSettle[];
  /** A statement is queued on `settled` that has not taken `unsent` yet. */
  sendQueued: boolean;
  /** The lease is gone (expired, taken over) or a record failed: stop working the lane. */
  lost: boolean;
  /** An operator's redelivery changed the lane under us: give it back, so it is read afresh. */
  changed: boolean;
  /** Its last settle gives it back. */
  released: boolean;
}

export function createWebhookDelivery(deps: WebhookDeliveryDeps): WebhookDelivery {
  const { db, config, clock, metrics } = deps;
  const settings = config.webhooks;
  const leaseMs = settings.timeoutMs + LEASE_MARGIN_MS + LEASE_SLACK_MS;

  /** What an attempt's result does to the notification (wire-contract §5 "Delivery"). */
  function decide(head: repo.LaneHead, result: AttemptResult): repo.AttemptRecord {
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
          return {
            attempt,
            status: 'dead',
            statusReason: `retry schedule exhausted after ${attemptsPerRound(settings)} attempts; last: ${result.error}`,
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
    logger: LaneLogger,
    { databaseUrl, listener }: { databaseUrl?: string; listener?: PgListener } = {},
  ) {
    const owner = `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
    // Delivery bookkeeping (claims, attempt results, releases) commits without waiting for the WAL flush. A
    // database crash can then lose its last few milliseconds, which only ever means a redelivery (a
    // "delivered" mark lost), a retry, or a lane claimed again once its lease expires: at least once holds.
    // The notifications themselves are written by the domain's own, synchronous, transactions.
    let store: Store | null = null;
    if (databaseUrl) {
      // Few connections: the lanes' statements are batched, so only a few are ever in flight at once.
      store = createStore(databaseUrl, {
        max: DELIVERY_POOL_SIZE,
        sessionSettings: { synchronous_commit: 'off' },
      });
    }
    const bookkeeping: Db = store?.db ?? db;
    const sender = createWebhookSender({ timeoutMs: settings.timeoutMs, now: clock.now });
    // The lanes worked at once share their settle and renewal statements (statement-batcher.ts), one of
    // each running at a time: under load the results of many lanes go in one statement.
    const settles = createBatcher({
      maxSize: BATCH_MAX,
      maxInFlight: 1,
      minGapMs: SETTLE_GAP_MS,
      key: (group) => laneKey(group.lane),
      // A group carries up to HEADS_PER_LANE results (more after a stall): counted by its rows, a statement
      // stays about as long as when each result was an item of its own (review: up to 2,000 rows).
      weight: (group) => Math.max(1, group.results.length),
      run: (groups: SettleGroup[]) => settleGroups(bookkeeping, owner, leaseMs, groups),
    });
    const renewals = createBatcher({
      maxSize: BATCH_MAX,
      maxInFlight: 1,
      key: laneKey,
      run: (lanes: Lane[]) => repo.renewLeases(bookkeeping, owner, lanes, leaseMs),
    });
    /** Lanes whose last settle is still to be written (awaited at stop). */
    const settling = new Set<Promise<void>>();
    /** Lanes being worked. */
    const runs = new Set<LaneRun>();

    /**
     * An operator redelivered a platform's notifications or changed its endpoint (null: any platform may
     * have): what its lanes in hand were read with may be out of date (an earlier notification pending again,
     * another URL, secret or subscription). Each of them being worked stops before its next attempt and is
     * given back, as are those claimed and not started; the next claims read them afresh. Other platforms'
     * lanes go on. (A NOTIFY takes milliseconds: an attempt already starting goes out.)
     */
    function refreshLanes(platformCode: string | null): void {
      noteChange(platformCode);
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

    // The same for the lanes of a claim whose answer is still on its way when the NOTIFY arrives: they are
    // neither being worked nor ready yet. Changes are counted; a claim notes the count when it is sent, and
    // its lanes of a platform changed since (or of every platform, after the LISTEN connection was lost and
    // NOTIFYs may have been missed) are given back instead of worked, to be claimed and read afresh.
    let changes = 0;
    let everyPlatformChangedAt = 0;
    const platformChangedAt = new Map<string, number>();
    function noteChange(platformCode: string | null): void {
      changes++;
      if (platformCode === null) everyPlatformChangedAt = changes;
      else platformChangedAt.set(platformCode, changes);
    }
    const changedSince = (mark: number, lane: Lane) =>
      everyPlatformChangedAt > mark || (platformChangedAt.get(lane.platformCode) ?? 0) > mark;

    async function claimFresh(limit: number, capped: repo.ClaimCap | null): Promise<repo.ClaimedLane[]> {
      let mark = changes;
      let fresh = await repo.claimLanes(bookkeeping, owner, {
        limit,
        leaseMs,
        perLane: HEADS_PER_LANE,
        capped,
      });
      // Until the lanes kept are handed over, a change reaches them only here: one that arrives while the
      // stale ones are being given back is looked at again.
      while (changes !== mark) {
        const kept: repo.ClaimedLane[] = [];
        const stale: Lane[] = [];
        for (const c of fresh) {
          if (changedSince(mark, c.lane)) stale.push(c.lane);
          else kept.push(c);
        }
        fresh = kept;
        mark = changes;
        // Given back, due at once; if that fails, they are claimed afresh when their lease expires.
        if (stale.length > 0) {
          await repo
            .releaseLanes(bookkeeping, owner, stale)
            .catch((err: unknown) => logger.error({ err }, 'webhook lane release failed'));
        }
      }
      return fresh;
    }

    // Decrypted secrets by ciphertext: a changed secret is a new ciphertext (fresh IV), so an entry never goes
    // stale; the map is only bounded. Decrypting per delivery was ~4 % of a worker's CPU.
    const secrets = new Map<string, string>();
    function secretOf(head: repo.LaneHead): string | null {
      const sealed = head.sealed_secret;
      if (!sealed) return null;
      let secret = secrets.get(sealed);
      if (secret === undefined) {
        if (secrets.size >= 1_000) secrets.clear();
        secret = decryptSecret(deps.secretKey, Buffer.from(sealed, 'base64'));
        secrets.set(sealed, secret);
      }
      return secret;
    }

    /**
     * Queues a settle of the lane (the result of an attempt, and/or giving the lane back) behind its earlier
     * ones, and learns from it about the lease and the notification's state. The lane's next statement takes
     * every result queued by the time it is sent.
     */
    function settle(run: LaneRun, result: repo.AttemptResultRecord | null, release: boolean): void {
      if (release) run.released = true;
      run.unsent.push({ result, release });
      queueSend(run);
    }

    /**
     * Resolves once every statement of the lane has been answered, those queued meanwhile included: a statement
     * may queue one more (sendUnsent: a second result of one notification), which awaiting `settled` once
     * missed, so that a stop closed the connections before the lane's release was written (review).
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
      const sending = takeSendable(run.unsent);
      // What takeSendable left (a second result of one notification) goes in the statement after.
      if (run.unsent.length > 0) queueSend(run);
      const results = sending.flatMap((u) => (u.result ? [u.result] : []));
      const release = sending.some((u) => u.release);
      const sentAt = performance.now();
      // Renewing costs a lane row update; it is needed only once the last renewal is getting old.
      const renew = !release && sentAt - run.confirmedAt > LEASE_SLACK_MS / 2;
      try {
        const settled = await settles.call({ lane: run.lane, results, renew, release });
        results.forEach((result, i) => {
          if (!settled.applied[i]) {
            run.changed = true;
            return;
          }
          const { status, attempt } = result.record;
          if (status === 'delivered' && attempt) {
            // From the attempt's end, not the record's: the record may be written up to SETTLE_GAP_MS later.
            const endedMs = attempt.startedAt.getTime() + attempt.durationMs;
            metrics.observeDelivered((endedMs - result.head.round_started_ms) / 1000);
          }
          if (status === 'dead') metrics.deadLettered();
        });
        if (!settled.leaseHeld) run.lost = true;
        else if (renew) run.confirmedAt = Math.max(run.confirmedAt, sentAt);
      } catch (err) {
        // The attempts were made but are not recorded: the notifications stay due and are attempted again
        // (at least once); the lane is due again when its lease expires. Stop working it.
        run.lost = true;
        logger.error({ err, lane: run.lane }, 'webhook lane could not be settled');
      }
    }

    /** Whether the lease is known to have at least the request timeout + 5 s left, renewing it if needed. */
    async function leaseHeld(run: LaneRun): Promise<boolean> {
      if (run.lost) return false;
      if (performance.now() - run.confirmedAt <= LEASE_SLACK_MS) return true;
      await allSettled(run); // the results sent since renew it
      if (run.lost) return false;
      if (performance.now() - run.confirmedAt <= LEASE_SLACK_MS) return true;
      const sentAt = performance.now();
      const held = await renewals.call(run.lane);
      if (held) run.confirmedAt = sentAt;
      else run.lost = true;
      return held;
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
            'webhook receiver no longer counted as slow (answered in time, idle for a minute, or its webhook changed)',
          );
      },
    });
    metrics.trackSlowReceivers(() => pace.slowPlatforms().length);

    /** Attempts (or skips) one notification; what happens to it. */
    async function attempt(lane: Lane, head: repo.LaneHead): Promise<repo.AttemptRecord> {
      if (head.skip_reason !== null || head.url === null) {
        // The platform's webhook was removed, disabled or unsubscribed from this type since it was recorded.
        return {
          attempt: null,
          status: 'skipped',
          statusReason: head.skip_reason ?? 'no webhook configured',
          roundAttempts: head.round_attempts,
          nextAttemptInMs: null,
        };
      }
      const rawBody = JSON.stringify(head.payload);
      const headers = webhookDeliveryHeaders({
        payloadType: head.payload_type as WebhookPayloadType,
        notificationId: head.notification_id,
        timestampMs: clock.now(),
        rawBody,
        secret: secretOf(head),
      });
      headers['user-agent'] = USER_AGENT;
      const ended = pace.started(lane.platformCode);
      let result: AttemptResult | undefined;
      try {
        result = await sender.send({ url: head.url, rawBody, headers });
      } finally {
        // (send does not throw; were it to, the attempt would still end here, not count as running forever)
        ended(result?.durationMs ?? 0);
      }
      metrics.observeAttempt(result.outcome, result.durationMs / 1000);
      return decide(head, result);
    }

    /**
     * Works a claimed lane oldest first until it is done, waits for a later retry, or must stop, and queues
     * the settle that gives it back. Resolves when its last attempt is made: the slot is then free, while the
     * bookkeeping goes on (tracked in `settling`).
     */
    async function workLane(claimed: ReadyLane, signal: AbortSignal): Promise<void> {
      const run: LaneRun = {
        lane: claimed.lane,
        confirmedAt: claimed.claimSentAt,
        settled: Promise.resolve(),
        unsent: [],
        sendQueued: false,
        lost: false,
        changed: false,
        released: false,
      };
      const { heads } = claimed;
      runs.add(run);
      try {
        let i = 0;
        let head = heads[0];
        while (head && !run.released) {
          if (signal.aborted || run.changed) break;
          // wait_ms was measured at the claim; time has passed since.
          const waitMs = head.due ? 0 : head.wait_ms - (performance.now() - claimed.claimSentAt);
          if (waitMs > 0) {
            // A retry later than the fast ones: give the lane back; it is due again at that time.
            if (waitMs > INLINE_WAIT_MAX_MS) break;
            await sleep(waitMs, undefined, { signal }).catch(() => {});
            if (signal.aborted) break;
          }
          if (!(await leaseHeld(run))) break;
          // The renewal may have taken a while: the worker may be stopping, or the lane changed, meanwhile.
          if (signal.aborted || run.changed) break;
          const outcome = await attempt(run.lane, head);
          const newStateToken = randomUUID();
          const again = outcome.status === 'retrying' || outcome.status === 'pending';
          const next: repo.LaneHead | undefined = again
            ? {
                ...head,
                state_token: newStateToken,
                round_attempts: outcome.roundAttempts,
                attempt_count: head.attempt_count + (outcome.attempt ? 1 : 0),
                due: outcome.nextAttemptInMs === 0,
                wait_ms: (outcome.nextAttemptInMs ?? 0) + (performance.now() - claimed.claimSentAt),
              }
            : heads[++i];
          // A retry is waited for in place only when the lane holds its slot for little longer that way: after
          // a failure that itself took long (a timeout, a slow error), the lane is given back, due at the retry,
          // so that a platform whose receiver hangs does not keep the slots from every other one for its whole
          // round of fast retries (review: 50-110 s).
          const retryLater =
            again &&
            ((outcome.nextAttemptInMs ?? 0) > INLINE_WAIT_MAX_MS ||
              (outcome.attempt?.durationMs ?? 0) > INLINE_WAIT_MAX_MS);
          // The last result of the lane gives it back in the same statement.
          const goesOn = next !== undefined && !signal.aborted && !retryLater;
          settle(run, { head, newStateToken, record: outcome }, !goesOn);
          head = next;
        }
      } finally {
        runs.delete(run);
        if (!run.released) settle(run, null, true);
        const done = allSettled(run).then(() => {
          if (run.lost)
            logger.warn({ lane: run.lane, owner }, 'webhook lane lease lost; its holder carries on');
          // The release has landed: the dispatcher looks again. It may be asleep until its poll or the
          // lane's lease expiry, having last looked while the lane was held: a later retry, notifications
          // recorded meanwhile (their NOTIFY came while the lane was held) or more than a claim takes are
          // due now or soon. Not for a lane claimed empty: that is one a producer is recording into, left due
          // by the release until it commits (its NOTIFY wakes us then); looking again at once only claimed
          // and released it in a loop meanwhile (review: ~850 times a second).
          else if (!signal.aborted && heads.length > 0) dispatcher.wake();
          settling.delete(done);
        });
        settling.add(done);
      }
    }

    const dispatcher = startDispatcher({
      concurrency: config.worker.concurrency,
      pollIntervalMs: config.worker.pollIntervalMs,
      // Started later than this, a lane's renewal (leaseHeld) would have less than LEASE_MARGIN_MS to land
      // before the claim's lease runs out.
      maxReadyAgeMs: leaseMs - LEASE_MARGIN_MS,
      pace,
      claim: claimFresh,
      work: workLane,
      release: (lanes) =>
        repo.releaseLanes(
          bookkeeping,
          owner,
          lanes.map((l) => l.lane),
        ),
      announce: () => repo.announceWork(bookkeeping),
      nextDueInMs: (excluded) => repo.nextLaneDueInMs(bookkeeping, excluded),
      onError: (err, message) => logger.error({ err }, message),
      onSlotsStuck: (lanes) =>
        logger.warn(
          { lanes, slots: config.worker.concurrency },
          'every webhook slot taken for over a second (receivers that hang?): lanes claimed given back to other workers',
        ),
    });
    listener
      ?.listen(repo.LANES_CHANNEL, {
        onMessage: (payload) => {
          const changed = repo.changedPlatform(payload);
          if (changed !== null) refreshLanes(changed);
          dispatcher.wake();
        },
        // Notifications may have been missed while disconnected: look for work.
        onConnected: () => dispatcher.wake(),
        // And an operator's change may have been missed: the lanes in hand are read afresh.
        onReconnected: () => refreshLanes(null),
      })
      .catch((err: unknown) => logger.error({ err }, 'webhook wake-ups not listened for; polling only'));

    let stopped: Promise<void> | null = null;
    const stopIntake = ({ drainMs = 0 }: { drainMs?: number } = {}) =>
      (stopped ??= (async () => {
        // The dispatcher stops claiming and its lanes stop before their next attempt, at once. The attempts
        // under way may finish within drainMs (DESIGN §6: a stopping instance finishes its in-flight work),
        // so that a restart does not send again what a receiver is answering; those still running then are
        // cut short.
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
        await Promise.all([...settling, unlistened]);
        // The lanes given back are due at once: the other workers look now, not at their poll (review: a
        // rolling deploy's lanes waited up to the poll interval, or their lease, 17 s, with a long one).
        await repo
          .announceWork(bookkeeping)
          .catch((err: unknown) => logger.warn({ err }, 'other workers not told of the lanes given back'));
      })());
    let closed: Promise<void> | null = null;
    return {
      stopIntake,
      // Once, like the stop: a second close waits for the first rather than closing what it closed.
      close: () =>
        (closed ??= (async () => {
          await stopIntake();
          await sender.close();
          await store?.close();
        })()),
    };
  }

  return { leaseMs, startWorkerSide };
}
