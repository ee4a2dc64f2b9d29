import { readFileSync } from 'node:fs';
import { Worker, type WorkerOptions } from 'node:worker_threads';
import type { Dispatcher } from 'undici';

/**
 * What the benches share: worker threads that run TypeScript, CPU time read from /proc, and the webhook
 * benches' payload.
 */

/**
 * A worker thread running the module at `moduleUrl` (a bench passes its own `import.meta.url` and tells
 * the thread's role by `workerData`). Node 20 does not carry this thread's module hooks into a worker, so
 * the thread registers tsx first, then loads the module.
 */
export function startTsxWorker(moduleUrl: string, options: WorkerOptions = {}): Worker {
  const bootstrap =
    `import(${JSON.stringify(import.meta.resolve('tsx/esm/api'))})` +
    `.then(({ register }) => { register(); return import(${JSON.stringify(moduleUrl)}); });`;
  return new Worker(bootstrap, { ...options, eval: true });
}

/**
 * user + system CPU ms of a /proc stat file (`/proc/<pid>/stat`, `/proc/self/task/<tid>/stat`): Linux, 10 ms
 * ticks; NaN elsewhere. Unlike req/s, CPU time hardly moves when other processes compete for the machine.
 */
export function procStatCpuMs(statPath: string): number {
  try {
    const fields = readFileSync(statPath, 'utf8').split(') ')[1]!.split(' ');
    return (Number(fields[11]) + Number(fields[12])) * 10;
  } catch {
    return NaN;
  }
}

/** The median (upper median for an even count) of `values`; NaN when there are none. */
export function median(values: number[]): number {
  return [...values].sort((a, b) => a - b)[Math.floor(values.length / 2)] ?? NaN;
}

/**
 * One POST through undici's dispatcher with a handler that keeps nothing: the least a webhook request costs a
 * process (the bare delivery loop's requests, the sender bench's baseline). Resolves with the status once the
 * response has ended.
 */
export function bareDispatch(
  agent: Dispatcher,
  request: { origin: string; path: string; body: string; headers: Record<string, string> },
): Promise<number> {
  return new Promise((resolve, reject) => {
    let status = 0;
    const handler: Dispatcher.DispatchHandler = {
      onRequestStart() {},
      onResponseStart(_controller, statusCode) {
        status = statusCode;
      },
      onResponseData() {},
      onResponseEnd() {
        resolve(status);
      },
      onResponseError(_controller, error) {
        reject(error);
      },
    };
    // Field by field: a spread here costs about 12 µs a request in undici (bench/webhook-sender.bench.ts).
    const { origin, path, body, headers } = request;
    agent.dispatch({ origin, path, method: 'POST', body, headers }, handler);
  });
}

/** The platform the webhook benches record for. */
export const BENCH_PLATFORM = 'BENCH1';

/** A trade_status_changed payload of the usual size: what the webhook benches deliver and sign. */
export const BENCH_TRADE_PAYLOAD = {
  trade_id: '9b2d6f0e-8d5a-4c1e-9f3b-2a7c1d4e5f60',
  client_trade_id: 'c0ffee00-0000-4000-8000-000000000000',
  trade_state: 'accepted',
  product: 'BTC/USD',
  side: 'buy',
  trade_price: '65000.25',
  trade_quantity: '0.015',
  platform_code: BENCH_PLATFORM,
  timestamp: 1_700_000_000_000,
};
