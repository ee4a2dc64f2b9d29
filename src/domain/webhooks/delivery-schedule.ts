import type { WebhookConfig } from '../../config.ts';

/**
 * The retry schedule of wire-contract §5 as data: after a failed attempt, a notification waits
 * `fastRetryDelayMs` for each of the first `fastRetries` retries (4 × 250 ms), then each entry of
 * `retryScheduleMs` in turn (5 s, 30 s, 2 min, …, 16 h) with ±`jitter` (20 %), and when the schedule is
 * used up it is dead-lettered. A redelivery starts a new round at the top of the schedule.
 */
export type RetrySchedule = Pick<
  WebhookConfig,
  'fastRetries' | 'fastRetryDelayMs' | 'retryScheduleMs' | 'jitter'
>;

/** Attempts in one round: the first, the fast retries, one per schedule entry. */
export function attemptsPerRound(schedule: RetrySchedule): number {
  return 1 + schedule.fastRetries + schedule.retryScheduleMs.length;
}

/**
 * Delay in ms before the next attempt, after `failedInRound` failed attempts in this round (1 = the first
 * attempt failed), or `null` when the schedule is exhausted and the notification is dead-lettered.
 * Fast retries are exact (they are meant to ride out a blip); scheduled ones are jittered so receivers
 * that failed together are not retried in lock-step.
 *
 * @example
 * retryDelay(schedule, 1)  // 250: first fast retry
 * retryDelay(schedule, 5)  // 4000..6000: the 5 s entry ± 20 %
 * retryDelay(schedule, 15) // null: 1 + 4 + 10 attempts made, dead-lettered
 */
export function retryDelay(
  schedule: RetrySchedule,
  failedInRound: number,
  random: () => number = Math.random,
): number | null {
  if (!Number.isInteger(failedInRound) || failedInRound < 1) {
    throw new RangeError(`failedInRound must be an integer >= 1, got ${failedInRound}`);
  }
  if (failedInRound <= schedule.fastRetries) return schedule.fastRetryDelayMs;
  const base = schedule.retryScheduleMs[failedInRound - schedule.fastRetries - 1];
  if (base === undefined) return null;
  const factor = 1 + schedule.jitter * (2 * random() - 1);
  return Math.max(0, Math.round(base * factor));
}
