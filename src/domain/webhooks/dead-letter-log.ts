import type { Clock } from '../../lib/clock.ts';
import type { Log } from '../../lib/log.ts';

/** How long after a platform's dead-letter line the next ones are only counted. */
const QUIET_MS = 60_000;

/** What is told of one notification that went dead. */
export interface DeadLetter {
  platformCode: string;
  notificationId: string;
  payloadType: string;
  reason: string | null;
}

/**
 * Tells the log of notifications that go dead (wire-contract §5: retries exhausted, or a 410 Gone): a delivery the
 * platform will not get unless the operator redelivers it. A platform's first at warn, then one line a minute at
 * most, saying how many more went dead since its last line (a receiver gone for a day dead-letters a whole day's
 * notifications, one by one); `svc_webhook_dead_lettered_total` counts them all and the operator's listing shows them.
 * The log probe found dead letters in no line at any level.
 */
export function createDeadLetterLog(logger: Pick<Log, 'warn'>, clock: Clock): (dead: DeadLetter) => void {
  /** Per platform (a few): when its next line may be written, and how many went dead since its last. */
  const platforms = new Map<string, { quietUntil: number; since: number }>();
  return (dead) => {
    const now = clock.now();
    const entry = platforms.get(dead.platformCode);
    if (entry && now < entry.quietUntil) {
      entry.since++;
      return;
    }
    logger.warn(
      {
        platform: dead.platformCode,
        notification: dead.notificationId,
        payloadType: dead.payloadType,
        reason: dead.reason,
        ...(entry && entry.since > 0 ? { moreSinceLastLine: entry.since } : {}),
      },
      'webhook notification dead-lettered (redeliver it from the operator API)',
    );
    platforms.set(dead.platformCode, { quietUntil: now + QUIET_MS, since: 0 });
  };
}
