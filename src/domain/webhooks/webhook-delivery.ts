import { randomUUID } from 'node:crypto';
import { hostname } from 'node:os';
import { setTimeout as sleep } from 'node:timers/promises';
import type { Config } from '../../config.ts';
import { webhookDeliveryHeaders } from '../../contract/webhook-signature.ts';
import type { WebhookPayloadType } from '../../contract/webhook-headers.ts';
import type { Clock } from '../../lib/clock.ts';
import { decryptSecret } from '../../lib/secret-box.ts';
import { createStore, type Db, type Store } from '../../store/database.ts';
import type { Lane } from './delivery-lane.ts';
import { attemptsPerRound, retryDelay } from './delivery-schedule.ts';
import type { WebhookMetrics } from './webhooks.metrics.ts';
import { createBatcher } from './statement-batcher.ts';
import * as repo from './webhooks.repository.ts';
import { createWebhookSender, type AttemptResult, type WebhookSender } from './webhook-sender.ts';

/**
 * The delivery side of wire-contract §5, run by every worker process (role worker or all).
 *
 * A graphile-worker job (`webhooks.deliver_lane`) works one lane, i.e. one platform's notifications for one
 * resource key:
 * 1. it claims the lane's lease (a row in webhook_delivery_leases, in the database, with an expiry), so that
 *    one worker at a time works a lane: this is what keeps per-resource order and what stops two workers
 *    from making the same attempt at once (issue 4 points 4 and 5);
 * 2. it takes the lane's oldest pending or retrying notification, and attempts it if it is due;
 * 3. it records the attempt and the new state, renewing the lease, in one statement, and moves on to the
 *    next notification of the lane (on success, dead letter or skip) or to the next attempt of the same one
 *    (after a failure whose retry is near: the fast retries are waited out while holding the lease);
 * 4. when the lane is empty, or its head waits for a later retry, or it has worked a batch, it releases the
 *    lease; releasing queues the lane's job again for the head's due time, if there is one;
 * 5. if the job started late (the queue is behind), it then adopts due lanes that nobody works, a few at a
 *    time, taking their queued jobs with them, and works them the same way: a backlog costs one queue job
 *    per batch of lanes instead of one per lane.
 *
 * The lease is renewed before every attempt to at least the request timeout + 5 s (issue 4 point 5). A
 * worker that dies (SIGKILL) leaves its lease to expire after that time; graphile-worker, however, keeps the
 * dead worker's job locked for 4 hours, so every worker also runs a sweeper that re-queues lanes whose
 * work is due but that have neither a live lease nor a runnable job.
 */

/** Issue 4 point 5: a claim lasts at least the request timeout plus this. */
export const LEASE_MARGIN_MS = 5_000;
/** Slack between renewing the lease and starting the request (signing and serialising take < 1 ms). */
const LEASE_SLACK_MS = 1_000;
/** Retries due within this are waited for in the job (the fast retries); later ones release the lane. */
const INLINE_WAIT_MAX_MS = 1_000;
/** A job hands its lane back after this many deliveries or this long, so busy lanes share the workers. */
const MAX_DELIVERIES_PER_RUN = 100;
const MAX_RUN_MS = 30_000;
/** The sweeper leaves alone lanes whose head became due less than this ago (their job may be starting). */
const SWEEP_GRACE_MS = 2_000;
const SWEEP_BATCH = 500;
/** A lane job that started this late after its due time adopts other due lanes (the queue is behind). */
const ADOPT_WHEN_QUEUED_MS = 50;
/** Lanes adopted at a time by one job (worked concurrently). */
const ADOPT_BATCH = 8;
/** Connections of the delivery bookkeeping (per worker process). */
const DELIVERY_POOL_SIZE = 4;
/** Most lane operations sent in one statement. */
const BATCH_MAX = 50;

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

export interface LaneRunResult {
  claimed: boolean;
  attempts: number;
}

export interface WebhookDelivery {
  /** The lease a claim takes: the request timeout + 5 s (+ 1 s slack). */
  readonly leaseMs: number;
  /** Works one lane (the body of the graphile-worker task). Never throws for a receiver's failure. */
  deliverLane(
    lane: Lane,
    context: { signal: AbortSignal; logger?: LaneLogger; queuedForMs?: number },
  ): Promise<LaneRunResult>;
  /** One sweep now (also run on a timer by {@link startWorkerSide}); returns the lanes re-queued. */
  sweep(): Promise<number>;
  /**
   * Starts the worker-side machinery of this process: the sweeper and, given the database URL, the
   * connections of the delivery bookkeeping (asynchronous commit). `stopIntake` makes running lane jobs
   * hand their lanes back after their current attempt and stops the sweeper; `close` releases the HTTP
   * connection pool, once the job runner has stopped.
   */
  startWorkerSide(
    logger: LaneLogger,
    databaseUrl?: string,
  ): { stopIntake(): Promise<void>; close(): Promise<void> };
}

class LeaseLost extends Error {}

export function createWebhookDelivery(deps: WebhookDeliveryDeps): WebhookDelivery {
  const { db, config, clock, metrics } = deps;
  const settings = config.webhooks;
  const leaseMs = settings.timeoutMs + LEASE_MARGIN_MS + LEASE_SLACK_MS;
  const workerTag = `${hostname()}:${process.pid}`;
  let sender: WebhookSender | null = null;
  let stopping = false;
  /** Once the worker side starts: the connections the delivery statements use (see startWorkerSide). */
  let deliveryStore: Store | null = null;
  const deliveryDb = () => deliveryStore?.db ?? db;
  // The lane jobs running at once in this process share their claim, record and release statements.
  const laneKey = (item: { lane: Lane }) => `${item.lane.platformCode}:${item.lane.resourceKey}`;
  const claims = createBatcher({
    maxSize: BATCH_MAX,
    key: laneKey,
    run: (items: repo.LaneClaim[]) => repo.claimLanes(deliveryDb(), items, leaseMs),
  });
  const records = createBatcher({
    maxSize: BATCH_MAX,
    key: laneKey,
    run: (items: repo.ResultRecord[]) => repo.recordResults(deliveryDb(), items, leaseMs),
  });
  const releases = createBatcher({
    maxSize: BATCH_MAX,
    key: laneKey,
    run: async (items: repo.LaneClaim[]) => {
      await repo.releaseLanes(deliveryDb(), items);
      return items.map(() => undefined);
    },
  });
  const getSender = () => (sender ??= createWebhookSender({ timeoutMs: settings.timeoutMs, now: clock.now }));

  function secretOf(head: repo.LaneHead): string | null {
    return head.secret_ciphertext ? decryptSecret(deps.secretKey, head.secret_ciphertext) : null;
  }

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

  /** Attempts (or skips) the head, records it, and returns the lane's head after it. */
  async function deliverHead(
    lane: Lane,
    owner: string,
    head: repo.LaneHead,
    signal: AbortSignal,
  ): Promise<repo.LaneHead | null> {
    let record: repo.AttemptRecord;
    if (head.skip_reason !== null || head.url === null) {
      // The platform's webhook was removed, disabled or unsubscribed from this type since it was recorded.
      record = {
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
      const result = await getSender().send({ url: head.url, rawBody, headers, signal });
      metrics.observeAttempt(result.outcome, result.durationMs / 1000);
      record = decide(head, result);
    }

    const recorded = await records.call({ lane, owner, head, record });
    if (recorded.applied) {
      if (record.status === 'delivered')
        metrics.observeDelivered((Date.now() - head.created_at.getTime()) / 1000);
      if (record.status === 'dead') metrics.deadLettered();
    }
    if (!recorded.leaseHeld) throw new LeaseLost();
    if (!recorded.applied) {
      // An operator redelivered it meanwhile: read the lane again rather than guess its state.
      const renewed = await repo.renewLane(deliveryDb(), lane, owner, leaseMs);
      if (!renewed.held) throw new LeaseLost();
      return renewed.head;
    }
    if (record.status === 'retrying' || record.status === 'pending') {
      // Still this lane's head, unless an older one was redelivered meanwhile (it comes first).
      if (recorded.next && recorded.next.seq < head.seq) return recorded.next;
      const waitMs = record.nextAttemptInMs ?? 0;
      return {
        ...head,
        state_token: recorded.stateToken,
        round_attempts: record.roundAttempts,
        attempt_count: head.attempt_count + (record.attempt ? 1 : 0),
        due: waitMs === 0,
        wait_ms: waitMs,
      };
    }
    return recorded.next;
  }

  /** Shared by a lane job's own lane and the lanes it adopts: the run's delivery and time budget. */
  interface RunBudget {
    attempts: number;
    until: number;
  }

  /** Works a claimed lane until it is empty, waits for a later retry, or the budget is spent; releases it. */
  async function workLane(
    lane: Lane,
    owner: string,
    first: repo.LaneHead | null,
    budget: RunBudget,
    signal: AbortSignal,
    logger?: LaneLogger,
  ): Promise<void> {
    let head = first;
    try {
      while (head && !signal.aborted && !stopping) {
        if (!head.due) {
          // A retry later than the fast ones: hand the lane back; the release queues it for that time.
          if (head.wait_ms > INLINE_WAIT_MAX_MS) break;
          await sleep(head.wait_ms, undefined, { signal }).catch(() => {});
          if (signal.aborted || stopping) break;
          const renewed = await repo.renewLane(deliveryDb(), lane, owner, leaseMs);
          if (!renewed.held) throw new LeaseLost();
          head = renewed.head;
          continue;
        }
        if (budget.attempts >= MAX_DELIVERIES_PER_RUN || performance.now() > budget.until) break;
        budget.attempts++;
        head = await deliverHead(lane, owner, head, signal);
      }
    } catch (error) {
      if (!(error instanceof LeaseLost)) throw error;
      // Only possible if this process stalled for longer than the lease; the new holder carries on.
      logger?.warn({ lane, owner }, 'webhook lane lease lost; another worker holds it now');
    } finally {
      // Also on a database error: the lane is then re-queued by graphile-worker's retry of this job, or by
      // the sweeper once the lease expires if the release itself cannot reach the database.
      await releases.call({ lane, owner }).catch((err: unknown) => {
        logger?.error({ err, lane }, 'webhook lane release failed; its lease will expire');
      });
    }
  }

  async function deliverLane(
    lane: Lane,
    context: { signal: AbortSignal; logger?: LaneLogger; queuedForMs?: number },
  ): Promise<LaneRunResult> {
    const { signal, logger } = context;
    const owner = `${workerTag}:${randomUUID().slice(0, 8)}`;
    const claim = await claims.call({ lane, owner });
    if (!claim.claimed) return { claimed: false, attempts: 0 };
    const budget: RunBudget = { attempts: 0, until: performance.now() + MAX_RUN_MS };
    await workLane(lane, owner, claim.head, budget, signal, logger);
    // A job that waited in the queue means the workers are behind: rather than leave each waiting lane to a
    // job of its own (two queue round trips and two WAL flushes each), this job adopts due lanes that nobody
    // works, a few at a time, until the backlog or its budget is spent.
    if ((context.queuedForMs ?? 0) >= ADOPT_WHEN_QUEUED_MS) {
      while (
        !signal.aborted &&
        !stopping &&
        budget.attempts < MAX_DELIVERIES_PER_RUN &&
        performance.now() < budget.until
      ) {
        const adopted = await repo.adoptLanes(deliveryDb(), owner, leaseMs, ADOPT_BATCH);
        if (adopted.length === 0) break;
        await Promise.all(adopted.map((a) => workLane(a.lane, owner, a.head, budget, signal, logger)));
      }
    }
    return { claimed: true, attempts: budget.attempts };
  }

  const sweep = () => repo.reviveStalledLanes(db, SWEEP_GRACE_MS, SWEEP_BATCH);

  function startWorkerSide(logger: LaneLogger, databaseUrl?: string) {
    stopping = false;
    if (databaseUrl && !deliveryStore) {
      // Delivery bookkeeping (leases, attempt results, wake-ups) commits without waiting for the WAL flush.
      // A database crash can then lose its last few milliseconds, which only ever means a redelivery (a
      // "delivered" mark lost), a retry, or a lane woken by the sweeper instead of its release: at least
      // once holds. The notifications themselves are written by the domain's own, synchronous, transactions.
      // Waiting for the flush was most of a delivery's cost (five flushes per delivery on a busy disk).
      const url = new URL(databaseUrl);
      url.searchParams.set('options', '-c synchronous_commit=off');
      // Few connections: the lane jobs' statements are batched, so only a few are ever in flight at once.
      deliveryStore = createStore(url.toString(), { max: DELIVERY_POOL_SIZE });
    }
    let timer: NodeJS.Timeout | null = null;
    let running: Promise<void> | null = null;
    const schedule = () => {
      // ±20 % so that several workers do not sweep in step.
      const delay = settings.sweepIntervalMs * (0.8 + Math.random() * 0.4);
      timer = setTimeout(tick, delay);
      timer.unref();
    };
    const tick = () => {
      running = sweep()
        .then((revived) => {
          if (revived > 0)
            logger.info({ revived }, 'webhook lanes re-queued after a worker stopped working them');
        })
        .catch((err: unknown) => logger.error({ err }, 'webhook sweep failed'))
        .finally(() => {
          running = null;
          if (!stopping) schedule();
        });
    };
    schedule();
    const stopIntake = async () => {
      stopping = true;
      if (timer) clearTimeout(timer);
      await running;
    };
    return {
      stopIntake,
      async close() {
        await stopIntake();
        await sender?.close();
        sender = null;
        const store = deliveryStore;
        deliveryStore = null;
        await store?.close();
      },
    };
  }

  return { leaseMs, deliverLane, sweep, startWorkerSide };
}
