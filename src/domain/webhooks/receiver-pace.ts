/**
 * Which platforms' receivers are slow, as one worker process sees them (webhook-dispatcher.ts keeps their
 * lanes to part of its slots). A receiver is slow once an attempt to it has taken over `slowMs`, answered
 * late, timed out, or still running that long, and fast again once an attempt is answered (any status, or
 * refused) within it when none has been late for `fastAgainMs`, once none has been late for `forgetMs` with none
 * under way (its lanes wait for later retries, or its webhook was disabled: when they come, a slow one is found out
 * again by its first attempts), or when an
 * operator changes its webhook (`forget`). Each worker learns this from its own attempts: nothing is shared
 * or stored, and a restart starts with every receiver fast.
 */
export interface ReceiverPace {
  /** An attempt to the platform's receiver starts; the function returned is called when it ends. */
  started(platformCode: string): (durationMs: number) => void;
  isSlow(platformCode: string): boolean;
  /** Whether any receiver is slow now (usually not): slowPlatforms() without building the list. */
  anySlow(): boolean;
  /** The platforms whose receivers are slow now. */
  slowPlatforms(): string[];
  /** Counts the platform's receiver as fast again (an operator changed its webhook). */
  forget(platformCode: string): void;
}

/** How long a receiver stays slow with no attempt to it late and none under way. */
const FORGET_AFTER_MS = 60_000;
/**
 * How long a slow receiver's answers must all have been in time before one in time makes it fast again. One answer
 * in time was enough before: a receiver whose answers took about a second, some over and some under, was slow and
 * fast by turns, a warning and an info line at each turn (session 32), and its lanes' share of the slots flapped
 * with them; three in a row still flapped at one answer in five late (review, session 33). Now it changes at most
 * once each way in this time.
 */
const FAST_AGAIN_AFTER_MS = 10_000;

export function createReceiverPace(options: {
  slowMs: number;
  fastAgainMs?: number;
  forgetMs?: number;
  /** Monotonic ms (performance.now by default; tests move it). */
  now?: () => number;
  /** An attempt that ended turned the platform's receiver slow, or fast again (for the logs). */
  onChange?: (platformCode: string, slow: boolean) => void;
}): ReceiverPace {
  const { slowMs, fastAgainMs = FAST_AGAIN_AFTER_MS, forgetMs = FORGET_AFTER_MS } = options;
  const now = options.now ?? (() => performance.now());
  /** Slow receivers, with when their last late attempt ended. */
  const slow = new Map<string, number>();
  /** The start times of the attempts under way, by platform (one entry per attempt). */
  const underway = new Map<string, number[]>();
  /**
   * When an operator last changed the platform's webhook (`forget`): attempts started before, to the old URL,
   * say nothing of the new one, running or ended.
   */
  const forgottenAt = new Map<string, number>();

  const runningLong = (platformCode: string, starts: number[] | undefined) => {
    if (!starts) return false;
    const since = now() - slowMs;
    const after = forgottenAt.get(platformCode) ?? -Infinity;
    return starts.some((startedAt) => startedAt < since && startedAt >= after);
  };

  function unmark(platformCode: string): void {
    if (slow.delete(platformCode)) options.onChange?.(platformCode, false);
  }

  /** Drops the marks of receivers with no attempt late for forgetMs and none under way. */
  function forgetIdle(): void {
    if (slow.size === 0) return;
    const before = now() - forgetMs;
    for (const [platformCode, lateAt] of slow) {
      if (lateAt < before && !underway.has(platformCode)) unmark(platformCode);
    }
  }

  return {
    started(platformCode) {
      const startedAt = now();
      let starts = underway.get(platformCode);
      if (!starts) underway.set(platformCode, (starts = []));
      starts.push(startedAt);
      return (durationMs) => {
        starts.splice(starts.indexOf(startedAt), 1);
        if (starts.length === 0 && underway.get(platformCode) === starts) underway.delete(platformCode);
        if (startedAt < (forgottenAt.get(platformCode) ?? -Infinity)) return;
        const lateAt = slow.get(platformCode);
        if (durationMs > slowMs) {
          if (lateAt === undefined) options.onChange?.(platformCode, true);
          slow.set(platformCode, now());
        } else if (
          lateAt !== undefined &&
          now() - lateAt >= fastAgainMs &&
          // Not while another attempt to it has been running past the threshold: it is still slow then (review: a
          // "no longer slow" line, and "slow" again at that attempt's end).
          !runningLong(platformCode, underway.get(platformCode))
        ) {
          unmark(platformCode);
        }
      };
    },
    isSlow(platformCode) {
      forgetIdle();
      return slow.has(platformCode) || runningLong(platformCode, underway.get(platformCode));
    },
    anySlow() {
      forgetIdle();
      if (slow.size > 0) return true;
      for (const [platformCode, starts] of underway) if (runningLong(platformCode, starts)) return true;
      return false;
    },
    slowPlatforms() {
      forgetIdle();
      const platforms = [...slow.keys()];
      for (const [platformCode, starts] of underway) {
        if (!slow.has(platformCode) && runningLong(platformCode, starts)) platforms.push(platformCode);
      }
      return platforms;
    },
    forget(platformCode) {
      if (forgottenAt.size >= 10_000) forgottenAt.clear();
      forgottenAt.set(platformCode, now());
      unmark(platformCode);
    },
  };
}
