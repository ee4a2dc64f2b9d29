import type { Log } from './log.ts';

/**
 * The log of something tried again and again while a dependency is away (the database during an outage): the first
 * failure with its error and stack, then one line every `everyMs` while failures go on, and one when a try succeeds
 * again; not one line, with its stack, per try (review: about ten a second from one worker).
 */
export interface FailureLog {
  /** A try failed. */
  failed(err: unknown, fields?: object): void;
  /** A try succeeded: logs the end of the failures, if there were any. */
  succeeded(): void;
}

export function createFailureLog(
  logger: Log,
  messages: { failed: string; stillFailing: string; recovered: string },
  /** `level`: of the failure lines (error by default; warn for a failure the process works around). */
  options: { everyMs?: number; now?: () => number; level?: 'error' | 'warn' } = {},
): FailureLog {
  const everyMs = options.everyMs ?? 30_000;
  const log = options.level === 'warn' ? logger.warn.bind(logger) : logger.error.bind(logger);
  const clock = options.now ?? (() => performance.now());
  /** Failures in a row: since when (performance.now()), how many, and when that was last logged. */
  let failing: { since: number; failures: number; loggedAt: number } | null = null;
  return {
    failed(err, fields = {}) {
      const now = clock();
      if (!failing) {
        failing = { since: now, failures: 1, loggedAt: now };
        log({ err, ...fields }, messages.failed);
        return;
      }
      failing.failures++;
      if (now - failing.loggedAt < everyMs) return;
      failing.loggedAt = now;
      log(
        {
          failures: failing.failures,
          forMs: Math.round(now - failing.since),
          error: (err as Error | null)?.message ?? String(err),
          ...fields,
        },
        messages.stillFailing,
      );
    },
    succeeded() {
      if (!failing) return;
      const { failures, since } = failing;
      failing = null;
      logger.info({ failures, forMs: Math.round(clock() - since) }, messages.recovered);
    },
  };
}
