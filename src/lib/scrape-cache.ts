import { Gauge } from 'prom-client';
import { within } from './within.ts';

/**
 * Numbers a metrics scrape reads from the database, shared by the scrapes close together and bounded in
 * time: one read at a time (a hung database does not collect a read, and a connection, per scrape), at most
 * one per `cacheMs`, and a scrape waits at most `waitMs` for it before it shows the last numbers read.
 * /metrics must answer while the database is away or hung; the age of what it shows says so.
 */
export interface ScrapeCache<T> {
  /** The latest numbers and when they were read (Date.now()), or null before the first read succeeds. */
  latest(): Promise<{ value: T; at: number } | null>;
}

export function createScrapeCache<T>(
  read: () => Promise<T>,
  { cacheMs, waitMs }: { cacheMs: number; waitMs: number },
): ScrapeCache<T> {
  let last: { value: T; at: number } | null = null;
  let reading: Promise<void> | null = null;
  const refresh = () =>
    (reading ??= read()
      .then(
        (value) => {
          last = { value, at: Date.now() };
        },
        () => {}, // the database is away: the last numbers stay, and their age shows it
      )
      .finally(() => {
        reading = null;
      }));
  return {
    async latest() {
      if (!last || Date.now() - last.at > cacheMs) {
        await within(refresh(), waitMs).catch(() => {}); // past the wait: the last numbers read
      }
      return last;
    },
  };
}

/**
 * The gauge that says how old a cache's numbers are (seconds since they were read; -1 before the first read),
 * registered beside the metrics it serves, so that numbers kept through a database outage are not taken for
 * current ones.
 */
export function scrapeAgeGauge(name: string, what: string, cache: ScrapeCache<unknown>): Gauge {
  return new Gauge({
    name,
    help: `Age of ${what} (they are kept while the database cannot be read); -1 before the first read`,
    registers: [],
    async collect() {
      const current = await cache.latest();
      this.set(current ? (Date.now() - current.at) / 1000 : -1);
    },
  });
}
