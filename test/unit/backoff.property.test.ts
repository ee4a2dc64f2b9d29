import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import fc from 'fast-check';

import { backoffBounds, backoffDelay, resolveRetryOptions } from '../../src/sdk/backoff.ts';
import { RETRY_CLASSES, decideRetry, type RequestOutcome } from '../../src/sdk/retry-policy.ts';

const attempt = fc.integer({ min: 1, max: 5000 });
const smallAttempt = fc.integer({ min: 1, max: 40 });
const unit = fc.double({ min: 0, max: 1, noNaN: true });
const cap = fc.integer({ min: 1, max: 600_000 });

/** The documented window, written out independently of the implementation (see backoff.ts). */
function documentedWindow(n: number, capMs: number): [number, number] {
  const doubling = 2 ** (n - 1);
  return 500 * doubling <= capMs ? [100 * doubling, 500 * doubling] : [capMs / 5, capMs];
}

describe('backoffDelay (spec 7.1.4)', () => {
  test('every delay lies in the documented window', () => {
    fc.assert(
      fc.property(attempt, unit, cap, (n, r, capMs) => {
        const [lo, hi] = documentedWindow(n, capMs);
        const d = backoffDelay(n, { random: () => r, capMs });
        assert.ok(d >= lo && d <= hi, `attempt ${n}, r ${r}, cap ${capMs}: ${d} not in [${lo}, ${hi}]`);
        assert.deepEqual(backoffBounds(n, { capMs }), { minMs: lo, maxMs: hi });
      }),
    );
  });

  test('the first delay is in [100, 500] ms whenever the cap allows 500', () => {
    fc.assert(
      fc.property(unit, fc.integer({ min: 500, max: 600_000 }), (r, capMs) => {
        const d = backoffDelay(1, { random: () => r, capMs });
        assert.ok(d >= 100 && d <= 500, String(d));
      }),
    );
    // The defaults, at the extremes of random().
    assert.equal(backoffDelay(1, { random: () => 0 }), 100);
    assert.equal(backoffDelay(1, { random: () => 1 }), 500);
  });

  test('never exceeds the cap, for any cap and attempt (default cap 5 s)', () => {
    fc.assert(
      fc.property(attempt, unit, cap, (n, r, capMs) => {
        assert.ok(backoffDelay(n, { random: () => r, capMs }) <= capMs);
        assert.ok(backoffDelay(n, { random: () => r }) <= 5000);
        // The top of the window is exactly reachable and exactly bounded, with no float overshoot.
        assert.equal(backoffDelay(n, { random: () => 1, capMs }), documentedWindow(n, capMs)[1]);
      }),
    );
  });

  test('the window doubles after each retry until it reaches the cap, then stays jittered', () => {
    fc.assert(
      fc.property(smallAttempt, cap, (n, capMs) => {
        const prev = backoffBounds(n, { capMs });
        const next = backoffBounds(n + 1, { capMs });
        if (prev.maxMs * 2 <= capMs) {
          assert.equal(next.minMs, prev.minMs * 2);
          assert.equal(next.maxMs, prev.maxMs * 2);
        } else {
          assert.equal(next.maxMs, capMs);
          // Same 1:5 ratio after the cap: clients do not retry in lock-step.
          assert.equal(next.minMs, capMs / 5);
        }
        assert.ok(next.minMs >= prev.minMs && next.maxMs >= prev.maxMs);
      }),
    );
  });

  test('the delay grows with random(): the draw is the only randomness', () => {
    fc.assert(
      fc.property(attempt, unit, unit, (n, a, b) => {
        const [lo, hi] = a <= b ? [a, b] : [b, a];
        assert.ok(backoffDelay(n, { random: () => lo }) <= backoffDelay(n, { random: () => hi }));
      }),
    );
  });

  test('bad inputs are refused', () => {
    for (const n of [0, -1, 1.5, Number.NaN]) assert.throws(() => backoffDelay(n), RangeError);
    assert.throws(() => backoffDelay(1, { random: () => 2 }), RangeError);
    assert.throws(() => backoffDelay(1, { capMs: 0 }), RangeError);
  });
});

const methods = fc.oneof(
  fc.constantFrom('GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'get', 'post', 'delete'),
  fc.string({ minLength: 1, maxLength: 8 }),
);
const retryClasses = fc.constantFrom(...RETRY_CLASSES);
const headerRecords = fc.option(
  fc.dictionary(fc.constantFrom('retry-after', 'svc-allow-retry', 'x-request-id'), fc.string()),
  {
    nil: undefined,
  },
);
const options = fc.record(
  {
    maxRetries: fc.integer({ min: 0, max: 1000 }),
    deadlineMs: fc.integer({ min: 0, max: 10 ** 9 }),
    capMs: fc.integer({ min: 1, max: 600_000 }),
  },
  { requiredKeys: [] },
);

describe('decideRetry properties', () => {
  test('a 500 is never retried, for any method, endpoint, attempt, budget, headers or body', () => {
    fc.assert(
      fc.property(
        methods,
        retryClasses,
        fc.integer({ min: 1, max: 10_000 }),
        fc.integer({ min: 0, max: 10 ** 9 }),
        headerRecords,
        fc.anything(),
        options,
        unit,
        (method, retryClass, n, elapsedMs, headers, body, opts, r) => {
          const outcome: RequestOutcome = { kind: 'response', status: 500, headers, body };
          const action = decideRetry(
            { method, retryClass, outcome, attempt: n, elapsedMs },
            { ...opts, random: () => r },
          );
          assert.equal(action.kind, 'return');
        },
      ),
    );
  });

  test('every resend stays within maxRetries and the deadline, and backoff waits stay in their window', () => {
    const outcomes = fc.oneof(
      fc.constant<RequestOutcome>({ kind: 'network-error' }),
      fc.record({
        kind: fc.constant('response' as const),
        status: fc.constantFrom(200, 202, 400, 401, 403, 404, 409, 413, 429, 500, 501, 502, 503, 504),
        headers: headerRecords,
      }),
    );
    fc.assert(
      fc.property(
        methods,
        retryClasses,
        outcomes,
        fc.integer({ min: 1, max: 50 }),
        fc.integer({ min: 0, max: 200_000 }),
        options,
        unit,
        (method, retryClass, outcome, n, elapsedMs, opts, r) => {
          const action = decideRetry(
            { method, retryClass, outcome, attempt: n, elapsedMs },
            { ...opts, random: () => r },
          );
          if (
            action.kind === 'retry' ||
            action.kind === 'check-then-retry' ||
            action.kind === 'wait-rate-limit'
          ) {
            const resolved = resolveRetryOptions(opts);
            assert.ok(n <= resolved.maxRetries, 'resend beyond maxRetries');
            assert.ok(elapsedMs + action.delayMs <= resolved.deadlineMs, 'wait beyond the deadline');
            if (action.kind === 'wait-rate-limit') {
              assert.ok(action.delayMs >= 10_000);
            } else {
              const { minMs, maxMs } = backoffBounds(n, { capMs: resolved.capMs });
              assert.ok(action.delayMs >= minMs && action.delayMs <= maxMs);
            }
          }
        },
      ),
    );
  });
});
