import assert from 'node:assert/strict';
import { describe, test } from 'node:test';

import { backoffDelay } from '../../src/sdk/backoff.ts';
import {
  OUTCOME_CLASSES,
  RETRY_CLASSES,
  RETRY_TABLE,
  SPEC_7_3_MESSAGES,
  classifyOutcome,
  decideRetry,
  findRetryRule,
  parseRetryAfterMs,
  retryClassFor,
  type OutcomeClass,
  type RequestOutcome,
  type RetryAction,
  type RetryClass,
  type RetryDecisionInput,
} from '../../src/sdk/retry-policy.ts';

type Kind = RetryAction['kind'];

/** Representative outcomes of each class, so the walk exercises the classifier too. */
const SAMPLES: Record<OutcomeClass, RequestOutcome[]> = {
  success: [
    { kind: 'response', status: 200 },
    { kind: 'response', status: 202, body: {} },
  ],
  'network-error': [
    { kind: 'network-error', error: new Error('ECONNRESET') },
    // Unreachable on a connection made (its request may have been sent): not "never connected" (review).
    {
      kind: 'network-error',
      error: new TypeError('fetch failed', { cause: { code: 'EHOSTUNREACH', syscall: 'read' } }),
    },
  ],
  '400': [
    { kind: 'response', status: 400, body: { errors: ['email: must be a valid email'] } },
    { kind: 'response', status: 400 },
  ],
  '400-spec-7.3': [
    { kind: 'response', status: 400, body: { errors: [SPEC_7_3_MESSAGES[0]] } },
    { kind: 'response', status: 400, body: { errors: ['country: bad', `email: ${SPEC_7_3_MESSAGES[1]}`] } },
    { kind: 'response', status: 400, body: JSON.stringify({ errors: [SPEC_7_3_MESSAGES[1]] }) },
  ],
  '404': [{ kind: 'response', status: 404, body: { error: 'Not Found' } }],
  '409': [{ kind: 'response', status: 409, body: { errors: ['lock not acquired'] } }],
  '429': [
    { kind: 'response', status: 429, headers: { 'retry-after': '4' }, body: { error: 'Too Many Requests' } },
  ],
  '500': [{ kind: 'response', status: 500, body: { error: 'Internal Server Error' } }],
  '502': [{ kind: 'response', status: 502 }],
  '503': [
    { kind: 'response', status: 503, headers: { 'svc-allow-retry': 'true' } },
    // No connection made: nothing was sent (as a CDN's 521-523).
    { kind: 'network-error', error: new TypeError('fetch failed', { cause: { code: 'ECONNREFUSED' } }) },
    { kind: 'network-error', error: new TypeError('fetch failed', { cause: { code: 'ENOTFOUND' } }) },
    {
      kind: 'network-error',
      error: new TypeError('fetch failed', { cause: { code: 'EHOSTUNREACH', syscall: 'connect' } }),
    },
    {
      kind: 'network-error',
      error: new TypeError('fetch failed', { cause: { code: 'UND_ERR_CONNECT_TIMEOUT' } }),
    },
  ],
  '504': [{ kind: 'response', status: 504 }],
  'other-error': [
    { kind: 'response', status: 401, body: { error: 'bad signature' } },
    { kind: 'response', status: 403, body: 'error code: 1020' },
    { kind: 'response', status: 413 },
    { kind: 'response', status: 501 },
  ],
};

const all = (kind: Kind): Record<RetryClass, Kind> => ({
  plain: kind,
  execute: kind,
  'customer-create': kind,
  'tenant-change': kind,
});

/**
 * The whole of spec 7.1–7.3 written out by hand, independently of RETRY_TABLE: for every outcome
 * class, what a read (GET, HEAD) and a write (POST, DELETE, PUT, PATCH) of each retry class must do.
 */
const EXPECTED: Record<OutcomeClass, { read: Kind; write: Record<RetryClass, Kind> }> = {
  success: { read: 'return', write: all('return') },
  // 7.1.1 GET retried; a POST without response is indeterminate like a 502.
  'network-error': {
    read: 'retry',
    write: { ...all('check-then-retry'), plain: 'return' },
  },
  '400': { read: 'return', write: all('return') },
  // 7.2 / 7.3: only customer creation recovers; elsewhere the message means nothing special.
  '400-spec-7.3': { read: 'return', write: { ...all('return'), 'customer-create': 'recover-7.3' } },
  // 7.2: only execute endpoints recover a 404.
  '404': { read: 'return', write: { ...all('return'), execute: 'recover-404' } },
  // wire-contract §9: an in-flight duplicate customer creation may get a 409 it can retry.
  '409': { read: 'return', write: { ...all('return'), 'customer-create': 'retry' } },
  '429': { read: 'wait-rate-limit', write: all('wait-rate-limit') },
  // 7.1.3: never.
  '500': { read: 'return', write: all('return') },
  // 7.1.2: indeterminate → check first, where there is a check.
  '502': { read: 'retry', write: { ...all('check-then-retry'), plain: 'return' } },
  '503': { read: 'retry', write: all('retry') },
  '504': { read: 'retry', write: { ...all('check-then-retry'), plain: 'return' } },
  'other-error': { read: 'return', write: all('return') },
};

const METHODS = { read: ['GET', 'HEAD', 'get'], write: ['POST', 'DELETE', 'PUT', 'PATCH', 'post'] } as const;

const input = (overrides: Partial<RetryDecisionInput>): RetryDecisionInput => ({
  method: 'GET',
  retryClass: 'plain',
  outcome: { kind: 'response', status: 200 },
  attempt: 1,
  elapsedMs: 0,
  ...overrides,
});

describe('retry table: every method × retry class × outcome class', () => {
  test('the expectations cover every outcome class', () => {
    assert.deepEqual(Object.keys(EXPECTED).sort(), [...OUTCOME_CLASSES].sort());
    assert.deepEqual(Object.keys(SAMPLES).sort(), [...OUTCOME_CLASSES].sort());
  });

  const rowsUsed = new Set<number>();
  for (const outcomeClass of OUTCOME_CLASSES) {
    for (const group of ['read', 'write'] as const) {
      for (const retryClass of RETRY_CLASSES) {
        const expected =
          group === 'read' ? EXPECTED[outcomeClass].read : EXPECTED[outcomeClass].write[retryClass];
        test(`${group} ${retryClass} ${outcomeClass} → ${expected}`, () => {
          for (const method of METHODS[group]) {
            for (const outcome of SAMPLES[outcomeClass]) {
              assert.equal(classifyOutcome(outcome), outcomeClass);
              const action = decideRetry(input({ method, retryClass, outcome }), { random: () => 0.5 });
              assert.equal(action.kind, expected, `${method} ${JSON.stringify(outcome)}: ${action.rule}`);
              assert.ok(action.rule.length > 0);
              rowsUsed.add(RETRY_TABLE.indexOf(findRetryRule(method, retryClass, outcomeClass)));
            }
          }
        });
      }
    }
  }

  test('every row of RETRY_TABLE is reached by the walk (no dead rows)', () => {
    assert.deepEqual(
      [...rowsUsed].sort((a, b) => a - b),
      RETRY_TABLE.map((_, i) => i),
    );
  });
});

describe('delays', () => {
  test('retry and check-then-retry wait the backoff delay of the attempt', () => {
    for (const attempt of [1, 2, 3]) {
      for (const r of [0, 0.25, 0.999]) {
        const random = () => r;
        const expected = backoffDelay(attempt, { random });
        const get = decideRetry(input({ attempt, outcome: { kind: 'response', status: 503 } }), { random });
        assert.deepEqual(get, { kind: 'retry', delayMs: expected, rule: get.rule });
        const exec = decideRetry(
          input({
            method: 'POST',
            retryClass: 'execute',
            attempt,
            outcome: { kind: 'response', status: 504 },
          }),
          { random },
        );
        assert.deepEqual(exec, { kind: 'check-then-retry', delayMs: expected, rule: exec.rule });
      }
    }
    const first = decideRetry(input({ outcome: { kind: 'network-error' } }), { random: () => 0 });
    assert.equal(first.kind === 'retry' && first.delayMs, 100);
  });

  const rateLimited = (
    headers?: Extract<RequestOutcome, { kind: 'response' }>['headers'],
  ): RetryDecisionInput => input({ method: 'POST', outcome: { kind: 'response', status: 429, headers } });
  const waitOf = (action: RetryAction) => (action.kind === 'wait-rate-limit' ? action.delayMs : undefined);

  test('429 without Retry-After waits 10 s', () => {
    assert.equal(waitOf(decideRetry(rateLimited())), 10_000);
    assert.equal(waitOf(decideRetry(rateLimited({}))), 10_000);
  });

  test('429 with a shorter Retry-After still waits 10 s', () => {
    assert.equal(waitOf(decideRetry(rateLimited({ 'retry-after': '3' }))), 10_000);
    assert.equal(waitOf(decideRetry(rateLimited({ 'Retry-After': '10' }))), 10_000);
  });

  test('429 with a longer Retry-After waits that long (seconds or HTTP-date, any header shape)', () => {
    assert.equal(waitOf(decideRetry(rateLimited({ 'retry-after': '25' }))), 25_000);
    assert.equal(waitOf(decideRetry(rateLimited(new Headers({ 'Retry-After': '12' })))), 12_000);
    assert.equal(waitOf(decideRetry(rateLimited({ 'retry-after': ['15'] }))), 15_000);
    const now = Date.parse('2026-01-01T00:00:00Z');
    const date = new Date(now + 30_000).toUTCString();
    assert.equal(waitOf(decideRetry(rateLimited({ 'retry-after': date }), { now: () => now })), 30_000);
  });

  test('a malformed Retry-After is ignored', () => {
    for (const value of ['soon', '-5', '1.5e3', '']) {
      assert.equal(waitOf(decideRetry(rateLimited({ 'retry-after': value }))), 10_000, value);
    }
    assert.equal(parseRetryAfterMs('2026'), 2_026_000);
    assert.equal(parseRetryAfterMs('Tue, 99 Foo 2026'), undefined);
    assert.equal(parseRetryAfterMs(undefined), undefined);
  });

  test('the 429 wait does not depend on randomness or the backoff cap', () => {
    assert.equal(waitOf(decideRetry(rateLimited(), { random: () => 0.99, capMs: 1000 })), 10_000);
  });
});

describe('retry budget', () => {
  const cases: {
    name: string;
    outcome: RequestOutcome;
    method: string;
    retryClass: RetryClass;
    spent: Kind;
  }[] = [
    {
      name: 'GET 502',
      outcome: { kind: 'response', status: 502 },
      method: 'GET',
      retryClass: 'plain',
      spent: 'return',
    },
    {
      name: 'POST 503',
      outcome: { kind: 'response', status: 503 },
      method: 'POST',
      retryClass: 'plain',
      spent: 'return',
    },
    {
      name: '429',
      outcome: { kind: 'response', status: 429 },
      method: 'GET',
      retryClass: 'plain',
      spent: 'return',
    },
    {
      name: 'execute 502',
      outcome: { kind: 'response', status: 502 },
      method: 'POST',
      retryClass: 'execute',
      spent: 'check-then-return',
    },
    {
      name: 'tenant removal network error',
      outcome: { kind: 'network-error' },
      method: 'DELETE',
      retryClass: 'tenant-change',
      spent: 'check-then-return',
    },
  ];

  for (const c of cases) {
    test(`${c.name}: resends up to maxRetries, then ${c.spent}`, () => {
      const at = (attempt: number, maxRetries?: number) =>
        decideRetry(input({ ...c, attempt }), { random: () => 0, maxRetries }).kind;
      // Default 3 retries: attempts 1..3 may be followed by a resend, attempt 4 may not.
      assert.notEqual(at(3), c.spent);
      assert.equal(at(4), c.spent);
      assert.equal(at(1, 0), c.spent);
      assert.notEqual(at(5, 5), c.spent);
      assert.equal(at(6, 5), c.spent);
    });

    test(`${c.name}: no wait is started that would end after the deadline`, () => {
      const decide = (elapsedMs: number) =>
        decideRetry(input({ ...c, elapsedMs }), { random: () => 0, deadlineMs: 20_000 }).kind;
      const delay = c.outcome.kind === 'response' && c.outcome.status === 429 ? 10_000 : 100;
      assert.notEqual(decide(20_000 - delay), c.spent);
      assert.equal(decide(20_000 - delay + 1), c.spent);
    });
  }

  test('recoveries are owed whatever the budget: they are look-ups, not resends', () => {
    const spent = { attempt: 99, elapsedMs: 10 ** 9 };
    assert.equal(
      decideRetry(
        input({
          ...spent,
          method: 'POST',
          retryClass: 'execute',
          outcome: { kind: 'response', status: 404 },
        }),
      ).kind,
      'recover-404',
    );
    assert.equal(
      decideRetry(
        input({
          ...spent,
          method: 'POST',
          retryClass: 'customer-create',
          outcome: { kind: 'response', status: 400, body: { errors: [SPEC_7_3_MESSAGES[0]] } },
        }),
      ).kind,
      'recover-7.3',
    );
  });

  test('500 is never retried, even with budget to spare', () => {
    const action = decideRetry(input({ outcome: { kind: 'response', status: 500 } }), { maxRetries: 100 });
    assert.deepEqual(action, { kind: 'return', rule: 'spec 7.1.3: 500 is never retried' });
  });

  test('bad arguments are refused', () => {
    assert.throws(() => decideRetry(input({ attempt: 0 })), RangeError);
    assert.throws(() => decideRetry(input({}), { maxRetries: -1 }), RangeError);
  });
});

describe('retryClassFor', () => {
  const cases: [string, string, RetryClass][] = [
    ['POST', '/liquidity/execute', 'execute'],
    ['POST', '/convert_withdraw/execute', 'execute'],
    ['post', '/convert_withdraw/execute?x=1', 'execute'],
    ['POST', '/participants/customers/new', 'customer-create'],
    [
      'POST',
      '/accounts/zrn:svc:us:account:customer:6f1c0a4e-2b7d-4a8e-9f3a-0c1d2e3f4a5b/tenants',
      'tenant-change',
    ],
    ['POST', '/accounts/zrn%3Asvc%3Aus%3Aaccount%3Acustomer%3Aabc/tenants', 'tenant-change'],
    ['DELETE', '/accounts/zrn:svc:us:account:customer:abc/tenants/ABC123', 'tenant-change'],
    ['GET', '/liquidity/rfq', 'plain'],
    ['GET', '/trades', 'plain'],
    ['GET', '/accounts/zrn:svc:us:account:customer:abc/tenants', 'plain'],
    ['DELETE', '/accounts/zrn:svc:us:account:customer:abc/tenants', 'plain'],
    ['POST', '/fund/rfq', 'plain'],
    ['POST', '/client_auth_token', 'plain'],
    ['POST', '/liquidity/execute/extra', 'plain'],
  ];
  for (const [method, path, expected] of cases) {
    test(`${method} ${path} → ${expected}`, () => assert.equal(retryClassFor(method, path), expected));
  }
});
