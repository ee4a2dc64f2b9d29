import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Config } from '../../config.ts';
import { webhookDeliveryHeaders } from '../../contract/webhook-signature.ts';
import type { WebhookPayloadType } from '../../contract/webhook-headers.ts';
import type { Clock } from '../../lib/clock.ts';
import { decryptSecret } from '../../lib/secret-box.ts';
import { createStore, type Db, type Store } from '../../store/database.ts';
import { PgListener } from '../../store/pg-listener.ts';
import { laneKey, type Lane } from './delivery-lane.ts';
import { attemptsPerRound, retryDelay } from './delivery-schedule.ts';
import type { WebhookMetrics } from './webhooks.metrics.ts';
import { createBatcher } from './statement-batcher.ts';
import * as repo from './webhooks.repository.ts';
import { startDispatcher, type ReadyLane } from './webhook-dispatcher.ts';
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
 * 3. each result is recorded (attempt row, new state, lease renewed) in the background, one statement for
 *    the results of all lanes of the same event-loop turn, while the lane goes on to its next notification:
 *    a delivery waits for the receiver, not for the bookkeeping. A lane's records are written in order;
 * 4. giving the lane back (webhook_release_lanes) waits for its records, then deletes the lane row if it
 *    is empty or leaves it due when its head is.
 *
 * The lease is the request timeout + 5 s + a slack, renewed by every record; an attempt starts only while
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
/** Most lane operations sent in one statement. */
const BATCH_MAX = 100;

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
   * Starts this process's dispatcher. Given the database URL, it listens for new work (NOTIFY) and does its
   * bookkeeping on connections of its own (asynchronous commit); without it, it polls on `db`. `stopIntake`
   * stops claiming, aborts the attempts under way (recorded as aborted, due again at once) and gives back
   * every lane held; `close` also releases the HTTP and database connections.
   */
  startWorkerSide(
    logger: LaneLogger,
    databaseUrl?: string,
  ): { stopIntake(): Promise<void>; close(): Promise<void> };
}

/** A lane being worked: what the records of its attempts tell about its lease and its state. */
interface LaneRun {
  lane: Lane;
  owner: string;
  /** performance.now() when the newest lease renewal known to have held was sent (the claim, a record). */
  confirmedAt: number;
  /** The lane's records, each written after the one before. Never rejects. */
  records: Promise<void>;
  /** The lease is gone (expired, taken over) or a record failed: stop working the lane. */
  lost: boolean;
  /** An operator's redelivery changed the lane under us: give it back, so it is read afresh. */
  changed: boolean;
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

  function startWorkerSide(logger: LaneLogger, databaseUrl?: string) {
    const owner = `${hostname()}:${process.pid}:${randomUUID().slice(0, 8)}`;
    // Delivery bookkeeping (claims, attempt results, releases) commits without waiting for the WAL flush. A
    // database crash can then lose its last few milliseconds, which only ever means a redelivery (a
    // "delivered" mark lost), a retry, or a lane claimed again once its lease expires: at least once holds.
    // The notifications themselves are written by the domain's own, synchronous, transactions.
    let store: Store | null = null;
    if (databaseUrl) {
      const url = new URL(databaseUrl);
      url.searchParams.set('options', '-c synchronous_commit=off');
      // Few connections: the lanes' statements are batched, so only a few are ever in flight at once.
      store = createStore(url.toString(), { max: DELIVERY_POOL_SIZE });
    }
    const bookkeeping: Db = store?.db ?? db;
    const sender = createWebhookSender({ timeoutMs: settings.timeoutMs, now: clock.now });
    // The lanes worked at once share their record, renewal and release statements (statement-batcher.ts).
    const batchKey = (item: { lane: Lane }) => laneKey(item.lane);
    const records = createBatcher({
      maxSize: BATCH_MAX,
      key: batchKey,
      run: (items: repo.ResultRecord[]) => repo.recordResults(bookkeeping, items, leaseMs),
    });
    const renewals = createBatcher({
      maxSize: BATCH_MAX,
      key: batchKey,
      run: (items: repo.LaneClaim[]) => repo.renewLeases(bookkeeping, items, leaseMs),
    });
    const releases = createBatcher({
      maxSize: BATCH_MAX,
      key: batchKey,
      run: async (items: repo.LaneClaim[]) => {
        await repo.releaseLanes(bookkeeping, items);
        return items.map(() => undefined);
      },
    });

    function secretOf(head: repo.LaneHead): string | null {
      return head.secret_ciphertext ? decryptSecret(deps.secretKey, head.secret_ciphertext) : null;
    }

    /** Queues the record of one result behind the lane's earlier ones; learns from it about the lease. */
    function record(run: LaneRun, head: repo.LaneHead, newStateToken: string, outcome: repo.AttemptRecord) {
      run.records = run.records.then(async () => {
        const sentAt = performance.now();
        try {
          const recorded = await records.call({
            lane: run.lane,
            owner: run.owner,
            head,
            newStateToken,
            record: outcome,
          });
          if (recorded.applied) {
            if (outcome.status === 'delivered')
              metrics.observeDelivered((Date.now() - head.created_at.getTime()) / 1000);
            if (outcome.status === 'dead') metrics.deadLettered();
          } else {
            run.changed = true;
          }
          if (recorded.leaseHeld) run.confirmedAt = Math.max(run.confirmedAt, sentAt);
          else run.lost = true;
        } catch (err) {
          // The attempt was made but is not recorded: the notification stays due and is attempted again
          // (at least once). Stop working the lane; its lease expires if the release cannot reach the
          // database either.
          run.lost = true;
          logger.error({ err, lane: run.lane }, 'webhook attempt could not be recorded');
        }
      });
    }

    /** Whether the lease is known to have at least the request timeout + 5 s left, renewing it if needed. */
    async function leaseHeld(run: LaneRun): Promise<boolean> {
      const fresh = () => performance.now() - run.confirmedAt <= LEASE_SLACK_MS;
      if (run.lost) return false;
      if (fresh()) return true;
      await run.records; // the records sent since renew it
      if (run.lost) return false;
      if (fresh()) return true;
      const sentAt = performance.now();
      const held = await renewals.call({ lane: run.lane, owner: run.owner });
      if (held) run.confirmedAt = sentAt;
      else run.lost = true;
      return held;
    }

    /** Attempts (or skips) one notification and queues its record; returns what happens to it. */
    async function attempt(run: LaneRun, head: repo.LaneHead, signal: AbortSignal) {
      let outcome: repo.AttemptRecord;
      if (head.skip_reason !== null || head.url === null) {
        // The platform's webhook was removed, disabled or unsubscribed from this type since it was recorded.
        outcome = {
          attempt: null,
          status: 'skipped',
          statusReason: head.skip_reason ?? 'no webhook configured',
          roundAttempts: head.round_attempts,
          nextAttemptInMs: null,
        };
      } else {
        const rawBody = JSON.stringify(head.payload);
        const headers = webhookDeliveryHeaders({
          payloadType: head.payload_type as WebhookPayloadType,
          notificationId: head.notification_id,
          timestampMs: clock.now(),
          rawBody,
          secret: secretOf(head),
        });
        headers['user-agent'] = USER_AGENT;
        const result = await sender.send({ url: head.url, rawBody, headers, signal });
        metrics.observeAttempt(result.outcome, result.durationMs / 1000);
        outcome = decide(head, result);
      }
      const newStateToken = randomUUID();
      record(run, head, newStateToken, outcome);
      return { outcome, newStateToken };
    }

    /** Works a claimed lane oldest first until it is done, waits for a later retry, or must stop; gives it back. */
    async function workLane(claimed: ReadyLane, signal: AbortSignal): Promise<void> {
      const run: LaneRun = {
        lane: claimed.lane,
        owner,
        confirmedAt: claimed.claimSentAt,
        records: Promise.resolve(),
        lost: false,
        changed: false,
      };
      // wait_ms was measured at the claim; time has passed since.
      const waitLeft = (head: repo.LaneHead) => head.wait_ms - (performance.now() - claimed.claimSentAt);
      try {
        lane: for (const first of claimed.heads) {
          let head = first;
          for (;;) {
            if (signal.aborted || run.changed) break lane;
            const waitMs = head.due ? 0 : waitLeft(head);
            if (waitMs > 0) {
              // A retry later than the fast ones: give the lane back; it is due again at that time.
              if (waitMs > INLINE_WAIT_MAX_MS) break lane;
              await sleep(waitMs, undefined, { signal }).catch(() => {});
              if (signal.aborted) break lane;
            }
            if (!(await leaseHeld(run))) break lane;
            const { outcome, newStateToken } = await attempt(run, head, signal);
            if (outcome.status !== 'retrying' && outcome.status !== 'pending') break; // next notification
            // Attempted again in place if the retry is near, by the loop above.
            head = {
              ...head,
              state_token: newStateToken,
              round_attempts: outcome.roundAttempts,
              attempt_count: head.attempt_count + (outcome.attempt ? 1 : 0),
              due: outcome.nextAttemptInMs === 0,
              wait_ms: (outcome.nextAttemptInMs ?? 0) + (performance.now() - claimed.claimSentAt),
            };
          }
        }
      } finally {
        await run.records;
        if (run.lost)
          logger.warn({ lane: run.lane, owner }, 'webhook lane lease lost; its holder carries on');
        // Also after a failed record: what is left of the lane is due again when its lease has expired, if
        // the release cannot reach the database either.
        await releases.call({ lane: run.lane, owner }).catch((err: unknown) => {
          logger.error({ err, lane: run.lane }, 'webhook lane release failed; its lease will expire');
        });
      }
    }

    const dispatcher = startDispatcher({
      concurrency: config.worker.concurrency,
      pollIntervalMs: config.worker.pollIntervalMs,
      claim: (limit) => repo.claimLanes(bookkeeping, owner, { limit, leaseMs, perLane: HEADS_PER_LANE }),
      work: workLane,
      release: (lanes) =>
        repo.releaseLanes(
          bookkeeping,
          lanes.map((l) => ({ lane: l.lane, owner })),
        ),
      nextDueInMs: () => repo.nextLaneDueInMs(bookkeeping),
      onError: (err, message) => logger.error({ err }, message),
    });
    const listener = databaseUrl
      ? new PgListener(databaseUrl, repo.LANES_CHANNEL, {
          onMessage: () => dispatcher.wake(),
          // Notifications may have been missed while disconnected: look for work.
          onConnected: () => dispatcher.wake(),
        })
      : null;
    void listener?.start();

    let stopped: Promise<void> | null = null;
    const stopIntake = () =>
      (stopped ??= (async () => {
        await listener?.stop();
        await dispatcher.stop();
      })());
    return {
      stopIntake,
      async close() {
        await stopIntake();
        await sender.close();
        await store?.close();
      },
    };
  }

  return { leaseMs, startWorkerSide };
}
