import assert from 'node:assert/strict';
import { test } from 'node:test';
import { reportFailure } from '../../src/cli/error-report.ts';
import { SvcConnectionError, SvcServerError } from '../../src/sdk/errors.ts';

/**
 * spec 7.1.2: a write with no answer (or a 502/504) that no check showed was not carried out may have been
 * (the SDK's `outcomeUnknown`); `svc` says so instead of only "unreachable", in text and in --json.
 */
test('a failure of unknown outcome is reported so', () => {
  const lost = new SvcConnectionError('POST /liquidity/execute: timed out', new Error('timeout'));
  lost.outcomeUnknown = true;
  const report = reportFailure(lost)!;
  assert.equal(report.exitCode, 3);
  assert.match(report.text, /^error: server unreachable \(POST \/liquidity\/execute: timed out\)\n/);
  assert.match(report.text, /outcome unknown: the request may have been carried out/);
  assert.equal(report.json.outcome_unknown, true);

  const gateway = new SvcServerError('HTTP 504: Gateway Timeout', 504, 'req-1', { error: 'Gateway Timeout' });
  gateway.outcomeUnknown = true;
  const answered = reportFailure(gateway)!;
  assert.equal(answered.exitCode, 1);
  assert.match(answered.text, /outcome unknown/);
});

test('a plain failure says nothing of the outcome', () => {
  const report = reportFailure(new SvcConnectionError('GET /trades: timed out', new Error('timeout')))!;
  assert.doesNotMatch(report.text, /outcome unknown/);
  assert.equal(report.json.outcome_unknown, undefined);
});
