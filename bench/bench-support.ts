import { readFileSync } from 'node:fs';
import { Worker, type WorkerOptions } from 'node:worker_threads';

/**
 * What the benches share: worker threads that run TypeScript, and CPU time read from /proc.
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
