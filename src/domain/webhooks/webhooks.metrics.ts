import { Counter, Gauge, Histogram, type Registry } from 'prom-client';
import { createScrapeCache, scrapeAgeGauge } from '../../lib/scrape-cache.ts';
import type { Db } from '../../store/database.ts';
import { ATTEMPT_OUTCOMES, type AttemptOutcome } from '../../store/tables/webhooks.tables.ts';
import { queueStats, type QueueStats } from './webhooks.repository.ts';

/**
 * Webhook metrics (issue 4 point 8, DESIGN §6).
 *
 * Queue state (pending, retrying, dead, oldest pending age) is read from the database at scrape time, so
 * every instance reports the same global numbers whichever process delivers; the latency and attempt
 * figures are counted by the process that makes the attempts (role worker or all).
 */
export interface WebhookMetrics {
  /** Commit (the notification's `created_at`), or an operator's redelivery, to its successful delivery. */
  observeDelivered(latencySeconds: number): void;
  observeAttempt(outcome: AttemptOutcome, durationSeconds: number): void;
  deadLettered(): void;
  /** How many platforms' receivers this process counts as slow now (receiver-pace.ts), read at each scrape. */
  trackSlowReceivers(count: () => number): void;
  /** How many undelivered notifications this process holds in memory now (lane-book.ts), read at each scrape. */
  trackHeldNotifications(count: () => number): void;
  /** Registers everything on `registry` (once per registry). */
  register(registry: Registry): void;
}

/** Scrapes closer together than this share one database read (lib/scrape-cache.ts). */
const STATS_CACHE_MS = 1_000;
/** How long a scrape waits for the queue numbers before it shows the last ones read. */
const STATS_WAIT_MS = 1_000;

export function createWebhookMetrics(
  db: Db,
  { statsCacheMs = STATS_CACHE_MS }: { statsCacheMs?: number } = {},
): WebhookMetrics {
  const latency = new Histogram({
    name: 'svc_webhook_delivery_latency_seconds',
    help: 'Time from a notification being committed (or redelivered by an operator) to its successful delivery',
    buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 1800, 3600],
    registers: [],
  });
  const attemptDuration = new Histogram({
    name: 'svc_webhook_attempt_duration_seconds',
    help: 'Duration of webhook delivery attempts (HTTP request to the receiver), by outcome',
    labelNames: ['outcome'],
    buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
    registers: [],
  });
  const attempts = new Counter({
    name: 'svc_webhook_attempts_total',
    help: 'Webhook delivery attempts, by outcome (delivered, failed, gone, aborted)',
    labelNames: ['outcome'],
    registers: [],
  });
  // Each outcome's series from the start, at zero (README: a process that does not deliver shows these at zero): a
  // series first made at its first attempt is missed by increase() and rate(), so an alert on the first `gone`
  // never fired (probe).
  for (const outcome of ATTEMPT_OUTCOMES) {
    attempts.inc({ outcome }, 0);
    attemptDuration.zero({ outcome });
  }
  const deadLetters = new Counter({
    name: 'svc_webhook_dead_lettered_total',
    help: 'Notifications dead-lettered by this process (retry schedule exhausted or 410 Gone)',
    registers: [],
  });

  /** A gauge of this process read at each scrape from what `track` was last given (0 until then). */
  const processGauge = (name: string, help: string) => {
    let read: () => number = () => 0;
    const gauge = new Gauge({
      name,
      help,
      registers: [],
      collect() {
        this.set(read());
      },
    });
    return {
      gauge,
      track: (count: () => number) => {
        read = count;
      },
    };
  };
  const slowReceivers = processGauge(
    'svc_webhook_slow_receivers',
    'Platforms whose receivers this process counts as slow (an attempt over a second): their lanes share at ' +
      "most half of its delivery slots while other platforms' lanes wait",
  );
  const held = processGauge(
    'svc_webhook_held_notifications',
    'Undelivered notifications this process holds in memory: at most SVC_WEBHOOK_MAX_HELD, past which the lanes ' +
      'waiting for a retry keep their first notification only',
  );

  const stats = createScrapeCache(() => queueStats(db), { cacheMs: statsCacheMs, waitMs: STATS_WAIT_MS });
  const gauge = (name: string, help: string, read: (s: QueueStats) => number) =>
    new Gauge({
      name,
      help,
      registers: [],
      async collect() {
        const current = await stats.latest();
        // NaN until the first read: a 0 then (prom-client's default) read as an empty queue to an alert.
        this.set(current ? read(current.value) : NaN);
      },
    });
  const queue = [
    gauge(
      'svc_webhook_pending',
      'Notifications waiting for their first attempt (or a redelivery)',
      (s) => s.pending,
    ),
    gauge('svc_webhook_retrying', 'Notifications that failed and wait for a retry', (s) => s.retrying),
    gauge('svc_webhook_dead', 'Dead-lettered notifications (kept, listed, redeliverable)', (s) => s.dead),
    gauge(
      'svc_webhook_oldest_pending_age_seconds',
      'Age of the oldest notification not yet delivered (pending or retrying); 0 when none',
      (s) => s.oldestPendingAgeSeconds,
    ),
    scrapeAgeGauge('svc_webhook_queue_stats_age_seconds', 'the webhook queue numbers above', stats),
  ];

  return {
    observeDelivered: (seconds) => latency.observe(Math.max(0, seconds)),
    observeAttempt: (outcome, seconds) => {
      attempts.inc({ outcome });
      attemptDuration.observe({ outcome }, seconds);
    },
    deadLettered: () => deadLetters.inc(),
    trackSlowReceivers: slowReceivers.track,
    trackHeldNotifications: held.track,
    register(registry) {
      for (const metric of [
        latency,
        attemptDuration,
        attempts,
        deadLetters,
        slowReceivers.gauge,
        held.gauge,
        ...queue,
      ]) {
        registry.registerMetric(metric);
      }
    },
  };
}
