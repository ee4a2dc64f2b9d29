import type { Config } from '../config.ts';
import { EXIT } from './exit-codes.ts';

/** The signals `svc serve` stops on; SIGHUP (a closed terminal) too, so the embedded PostgreSQL is not left running. */
const STOP_SIGNALS = ['SIGTERM', 'SIGINT', 'SIGHUP'] as const;

/** The first Ctrl-C's word on the second (README Operations, Shutdown). */
const AGAIN_TO_EXIT = 'Ctrl-C again to exit at once, without waiting for the work in flight';

/**
 * A Ctrl-C within this long of the first stop signal is the same Ctrl-C: under `npm start` (and `npx svc`) the
 * terminal sends it to svc and npm passes its own on, a few ms later (review: one Ctrl-C exited at once, 3 times in 4).
 */
export const SAME_CTRL_C_MS = 1_000;

/** When the process got its first stop signal (performance.now()): a Ctrl-C long enough after it ends the process. */
let firstStopAt: number | undefined;

/**
 * The first stop (a signal, or the process's own: `signal` then says why): noted, as what a later Ctrl-C is measured
 * from, and logged at info as `message`; a Ctrl-C's line says a second one exits at once.
 */
export function firstStop(
  logger: { info(obj: object, msg: string): void },
  signal: string,
  message: string,
): void {
  firstStopAt ??= performance.now();
  logger.info(signal === 'SIGINT' ? { signal, hint: AGAIN_TO_EXIT } : { signal }, message);
}

/**
 * A stop signal while a stop is under way: a Ctrl-C at least SAME_CTRL_C_MS after the first stop ends the process at
 * once, failed: whoever presses it again will not wait out the work in flight. Cutting it is safe: an uncommitted
 * transaction is rolled back, a job or webhook attempt under way runs again (at least once), and the embedded
 * PostgreSQL is stopped as the process exits (embedded-postgres.ts). A supervisor's signals (SIGTERM, SIGHUP) keep the
 * stop and its bound: it sends SIGKILL when it will not wait.
 */
export function stopAgain(logger: { warn(obj: object, msg: string): void }, signal: string): void {
  if (signal !== 'SIGINT' || firstStopAt === undefined || performance.now() - firstStopAt < SAME_CTRL_C_MS)
    return;
  logger.warn({ signal }, 'stop asked again: exiting now, without waiting for the work in flight');
  process.exit(EXIT.failed);
}

/**
 * Runs `step` keeping a stop signal (SIGTERM, SIGINT, SIGHUP) for after it, so that what it starts (the embedded
 * PostgreSQL) is stopped by svc rather than left running by Node's default end of the process. Bounded: past
 * SVC_SHUTDOWN_TIMEOUT_MS from the signal, `timedOut` is logged, `giveUp` is awaited (its failure ignored) and the
 * process ends, failed.
 *
 * Gives the step's result and `handOver(stop)`, which hands the signals to `stop`: the one kept, if any, at once
 * with how long it was kept (for the stop to end within SVC_SHUTDOWN_TIMEOUT_MS of the signal, as any does), and
 * those to come. Signals are kept until then, and `stop`'s listeners are added before the keeping ones are
 * removed: removing a signal's last listener drops one caught but not yet dispatched, and a SIGTERM that came as
 * the start ended was lost, the server left running (probe).
 */
export async function keepingStops<T>(
  config: Readonly<Pick<Config, 'shutdownTimeoutMs'>>,
  logger: {
    info(obj: object, msg: string): void;
    warn(obj: object, msg: string): void;
    error(msg: string): void;
  },
  {
    kept,
    timedOut,
    step,
    giveUp = async () => {},
  }: { kept: string; timedOut: string; step: () => Promise<T>; giveUp?: () => Promise<unknown> },
): Promise<{ result: T; handOver(stop: (signal: NodeJS.Signals, keptForMs?: number) => void): void }> {
  let signalled: NodeJS.Signals | null = null;
  let signalledAt = 0;
  let bound: NodeJS.Timeout | undefined;
  const keep = (signal: NodeJS.Signals) => {
    if (signalled) return stopAgain(logger, signal);
    firstStop(logger, signal, kept);
    signalled = signal;
    signalledAt = performance.now();
    bound = setTimeout(() => {
      logger.error(timedOut);
      void giveUp()
        .catch(() => {})
        .finally(() => process.exit(EXIT.failed));
    }, config.shutdownTimeoutMs).unref();
  };
  const release = () => {
    // The step has ended: what the bound was for. A stop from here has its own (serve's shutdown), which a kept
    // signal's stop shortens by the time it was kept.
    clearTimeout(bound);
    for (const signal of STOP_SIGNALS) process.off(signal, keep);
  };
  for (const signal of STOP_SIGNALS) process.on(signal, keep);
  let result: T;
  try {
    result = await step();
  } catch (error) {
    release();
    throw error;
  }
  return {
    result,
    handOver(stop) {
      // The name only: Node passes the signal's number after it, which serve's stop would read as its exit code.
      for (const signal of STOP_SIGNALS) process.on(signal, (name: NodeJS.Signals) => stop(name));
      release();
      if (signalled) stop(signalled, performance.now() - signalledAt);
    },
  };
}
