import type { Log } from '../../lib/log.ts';

/** How long after a platform's dead-letter line the next ones are only counted. */
export const DEAD_LETTER_QUIET_MS = 60_000;
export const DEAD_LETTER_MESSAGE = 'webhook notification dead-lettered (redeliver it from the operator API)';
export const MORE_DEAD_LETTERS_MESSAGE =
  'more webhook notifications dead-lettered (GET …/notifications?status=dead)';

/** What is told of one notification that went dead. */
export interface DeadLetter {
  platformCode: string;
  notificationId: string;
  payloadType: string;
  reason: string | null;
}

export interface DeadLetterLog {
  tell(dead: DeadLetter): void;
  /** Writes the counts still held (the worker is stopping) and stops the timers. */
  flush(): void;
}

/**
 * Tells the log of notifications that go dead (wire-contract §5: retries exhausted, or a 410 Gone): a delivery the
 * platform will not get unless the operator redelivers it. A platform's first at warn with its id and reason; those
 * of the following minute are counted, and their count written when the minute ends (`moreSinceLastLine`), so that
 * a receiver gone for a day writes a line a minute, not a line per notification; per process.
 * `svc_webhook_dead_lettered_total` counts them all and the operator's listing shows them. The log probe found dead
 * letters in no line at any level; a review, a count held until a next dead letter that might never come.
 * `schedule` (a timer, unref'd) is for tests.
 */
export function createDeadLetterLog(
  logger: Pick<Log, 'warn'>,
  schedule: (run: () => void, ms: number) => { clear(): void } = unrefTimer,
): DeadLetterLog {
  /** Per platform (a few) in its quiet minute: the dead letters counted since its last line, and its timer. */
  const quiet = new Map<string, { since: number; timer: { clear(): void } }>();

  /** The quiet minute of `platformCode` ends: its count written if it has one, and a new minute begun if so. */
  function endQuiet(platformCode: string): void {
    const entry = quiet.get(platformCode);
    if (!entry) return;
    quiet.delete(platformCode);
    if (entry.since === 0) return;
    logger.warn({ platform: platformCode, moreSinceLastLine: entry.since }, MORE_DEAD_LETTERS_MESSAGE);
    startQuiet(platformCode);
  }

  function startQuiet(platformCode: string): void {
    quiet.set(platformCode, {
      since: 0,
      timer: schedule(() => endQuiet(platformCode), DEAD_LETTER_QUIET_MS),
    });
  }

  return {
    tell(dead) {
      const entry = quiet.get(dead.platformCode);
      if (entry) {
        entry.since++;
        return;
      }
      logger.warn(
        {
          platform: dead.platformCode,
          notification: dead.notificationId,
          payloadType: dead.payloadType,
          reason: dead.reason,
        },
        DEAD_LETTER_MESSAGE,
      );
      startQuiet(dead.platformCode);
    },
    flush() {
      for (const [platformCode, entry] of [...quiet]) {
        entry.timer.clear();
        quiet.delete(platformCode);
        if (entry.since > 0)
          logger.warn({ platform: platformCode, moreSinceLastLine: entry.since }, MORE_DEAD_LETTERS_MESSAGE);
      }
    },
  };
}

function unrefTimer(run: () => void, ms: number): { clear(): void } {
  const timer = setTimeout(run, ms);
  timer.unref();
  return { clear: () => clearTimeout(timer) };
}
