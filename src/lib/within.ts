/**
 * `work`, or a rejection with "no answer within `ms` ms" if it has not settled by then (the work itself goes
 * on; the caller stops waiting). For the waits that must stay bounded when a server stops answering: a
 * readiness probe, a heartbeat, a metrics scrape. Its timer does not hold the process open.
 */
export function within<T>(work: Promise<T>, ms: number): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_resolve, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer within ${ms} ms`)), ms);
    timer.unref();
  });
  return Promise.race([work, timeout]).finally(() => clearTimeout(timer));
}
