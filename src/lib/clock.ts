/** Source of the current time in epoch milliseconds; injected everywhere time matters so tests control it. */
export interface Clock {
  now(): number;
}

export const systemClock: Clock = { now: () => Date.now() };

/**
 * Whole epoch milliseconds, as Date.now() gives, that only move forward, at the pace of real time: the process's start on the wall clock plus
 * the monotonic time since. For what a process times on its own (how long a block lasts, when to try again), which
 * a step of the wall clock (NTP, a virtual machine resumed) must not stretch or cut short; it parts from the wall
 * clock by the steps made since the start.
 */
export const monotonicClock: Clock = { now: () => Math.floor(performance.timeOrigin + performance.now()) };

/** A clock that only moves when told to: for tests of windows, expiries and schedules. */
export class ManualClock implements Clock {
  constructor(private current = 1_700_000_000_000) {}
  now(): number {
    return this.current;
  }
  set(ms: number): void {
    this.current = ms;
  }
  advance(ms: number): void {
    this.current += ms;
  }
}
