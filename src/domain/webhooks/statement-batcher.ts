/**
 * Groups the calls that a worker's concurrent deliveries make in the same event-loop turn into one database
 * statement (the DataLoader technique): today the records of their attempts (webhook-delivery.ts). Made one
 * statement each, those statements' fixed cost (round trip, parse, plan), not the rows, bound the delivery rate.
 * Each item keeps its own meaning and result: a batch is only a way to send many independent operations at once.
 *
 * - Calls are collected until the end of the current turn (`setImmediate`), so a lone call is not delayed.
 * - At most `maxInFlight` batches run at once; calls made meanwhile wait for one to finish and then go
 *   together (group commit): the busier the lanes, the larger the batches.
 * - `minGapMs` spaces the batches further, for callers that need no answer soon: each statement's fixed
 *   cost (a round trip, a transaction, the executor's start per statement) is then shared by more items.
 * - A batch never holds two items with the same key (one lane, one notification): they would update the
 *   same row twice in one statement. The later one waits for the next batch.
 * - `weight` counts an item as that many towards `maxSize` (one that carries several rows); an item heavier
 *   than `maxSize` goes alone.
 * - If a batch statement fails, its items are retried each in a statement of its own (at once), so one item's
 *   failure (or a deadlock between two processes' batches) fails only that item. A statement that committed
 *   before its answer was lost (a connection dropped) is so sent again: `run` must be safe to repeat (an attempt's
 *   record is, since migration 0025).
 */
export interface Batcher<I, O> {
  call(item: I): Promise<O>;
}

export function createBatcher<I, O>(options: {
  maxSize: number;
  /** Batches running at once; more calls wait and are sent together. Default: no limit. */
  maxInFlight?: number;
  /** Least time between the starts of two batches, unless maxSize calls are waiting. Default 0. */
  minGapMs?: number;
  /** Monotonic ms (performance.now by default; tests move it). */
  now?: () => number;
  key: (item: I) => string;
  /** What an item counts towards maxSize (1 by default). */
  weight?: (item: I) => number;
  run: (items: I[]) => Promise<O[]>;
}): Batcher<I, O> {
  type Pending = { item: I; resolve: (value: O) => void; reject: (error: unknown) => void };
  let queue: Pending[] = [];
  /** The weights of `queue` summed: kept as it changes, since every call's flush reads it while a gap lasts. */
  let queuedWeight = 0;
  let scheduled = false;
  let inFlight = 0;
  const maxInFlight = options.maxInFlight ?? Infinity;
  const minGapMs = options.minGapMs ?? 0;
  const now = options.now ?? (() => performance.now());
  const weightOf = options.weight ?? (() => 1);
  let lastStart = -Infinity;
  let gapTimer: NodeJS.Timeout | null = null;

  const schedule = () => {
    if (scheduled) return;
    scheduled = true;
    setImmediate(flush);
  };

  async function runEach(batch: Pending[]): Promise<void> {
    await Promise.all(
      batch.map(async (p) => {
        try {
          const [result] = await options.run([p.item]);
          p.resolve(result as O);
        } catch (error) {
          p.reject(error);
        }
      }),
    );
  }

  function flush(): void {
    scheduled = false;
    if (inFlight >= maxInFlight) return; // the running batch's end flushes again
    const wait = lastStart + minGapMs - now();
    if (wait > 0 && queuedWeight < options.maxSize) {
      gapTimer ??= setTimeout(() => {
        gapTimer = null;
        flush();
      }, wait);
      return;
    }
    lastStart = now();
    const batch: Pending[] = [];
    const rest: Pending[] = [];
    const keys = new Set<string>();
    let weight = 0;
    for (const p of queue) {
      const key = options.key(p.item);
      const itemWeight = weightOf(p.item);
      if ((batch.length === 0 || weight + itemWeight <= options.maxSize) && !keys.has(key)) {
        keys.add(key);
        batch.push(p);
        weight += itemWeight;
      } else {
        rest.push(p);
      }
    }
    queue = rest;
    queuedWeight -= weight;
    if (queue.length) schedule();
    if (batch.length === 0) return;
    inFlight++;
    void (async () => {
      try {
        let results: O[];
        try {
          results = await options.run(batch.map((p) => p.item));
          if (results.length !== batch.length)
            throw new Error('a batch returned the wrong number of results');
        } catch (error) {
          if (batch.length === 1) batch[0]!.reject(error);
          else await runEach(batch);
          return;
        }
        batch.forEach((p, i) => p.resolve(results[i] as O));
      } finally {
        inFlight--;
        if (queue.length) schedule();
      }
    })();
  }

  return {
    call(item) {
      return new Promise<O>((resolve, reject) => {
        queue.push({ item, resolve, reject });
        queuedWeight += weightOf(item);
        schedule();
      });
    },
  };
}
