/**
 * Which platforms' receivers are slow, as one worker process sees them (webhook-dispatcher.ts lets those
 * platforms share at most half of its slots). A receiver is slow once an attempt to it has taken over
 * `slowMs`, answered late, timed out, or still running that long, and fast again once an attempt is answered
 * (any status, or refused) within it. Each worker learns this from its own attempts: nothing is shared or
 * stored, and a restart starts with every receiver fast.
 */
export interface ReceiverPace {
  /** An attempt to the platform's receiver starts; the function returned is called when it ends. */
  started(platformCode: string): (durationMs: number) => void;
  isSlow(platformCode: string): boolean;
  /** Whether any receiver is slow now (usually not): slowPlatforms() without building the list. */
  anySlow(): boolean;
  /** The platforms whose receivers are slow now. */
  slowPlatforms(): string[];
}

export function createReceiverPace(options: {
  slowMs: number;
  /** Monotonic ms (performance.now by default; tests move it). */
  now?: () => number;
  /** An attempt that ended turned the platform's receiver slow, or fast again (for the logs). */
  onChange?: (platformCode: string, slow: boolean) => void;
}): ReceiverPace {
  const { slowMs } = options;
  const now = options.now ?? (() => performance.now());
  /** Slow by the last attempt that ended. */
  const slow = new Set<string>();
  /** The start times of the attempts under way, by platform (one entry per attempt). */
  const underway = new Map<string, number[]>();

  const runningLong = (starts: number[] | undefined) => {
    if (!starts) return false;
    const since = now() - slowMs;
    return starts.some((startedAt) => startedAt < since);
  };

  return {
    started(platformCode) {
      const startedAt = now();
      let starts = underway.get(platformCode);
      if (!starts) underway.set(platformCode, (starts = []));
      starts.push(startedAt);
      return (durationMs) => {
        starts.splice(starts.indexOf(startedAt), 1);
        if (starts.length === 0 && underway.get(platformCode) === starts) underway.delete(platformCode);
        const wasSlow = slow.has(platformCode);
        const isSlow = durationMs > slowMs;
        if (isSlow === wasSlow) return;
        if (isSlow) slow.add(platformCode);
        else slow.delete(platformCode);
        options.onChange?.(platformCode, isSlow);
      };
    },
    isSlow: (platformCode) => slow.has(platformCode) || runningLong(underway.get(platformCode)),
    anySlow() {
      if (slow.size > 0) return true;
      for (const starts of underway.values()) if (runningLong(starts)) return true;
      return false;
    },
    slowPlatforms() {
      const platforms = [...slow];
      for (const [platformCode, starts] of underway) {
        if (!slow.has(platformCode) && runningLong(starts)) platforms.push(platformCode);
      }
      return platforms;
    },
  };
}
