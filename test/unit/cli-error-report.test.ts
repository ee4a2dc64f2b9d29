import assert from 'node:assert/strict';
import { test } from 'node:test';
import { AdminApiError } from '../../src/cli/admin-client.ts';
import { ExplainedFailure, noteWhereSeen, reportFailure } from '../../src/cli/error-report.ts';
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
  // Not only the trades: a customer account, a tenant change or a customer is seen elsewhere (probe).
  assert.match(
    answered.text,
    /look \(with the API's reads that show what the command changes: svc api trades, accounts, details ZRN, participants\)/,
  );
});

test('an `errors` entry that is no text is printed as JSON, not as [object Object]', () => {
  // Probe: a wrong --url reached a service whose 400 lists objects.
  const report = reportFailure(
    new AdminApiError(400, { errors: [{ code: 'E1', detail: 'bad thing' }, 'plain', 7] }),
  )!;
  assert.equal(
    report.text,
    'error: the operator API answered 400: {"code":"E1","detail":"bad thing"}\n  plain\n  7',
  );
  assert.deepEqual(report.json.errors, ['{"code":"E1","detail":"bad thing"}', 'plain', '7']);
});

test("an operator write's unknown outcome points at the operator API's record, not the platform's trades", () => {
  // Probe: `svc balances adjust` that timed out was told to look at `svc api trades`.
  const lost = new AdminApiError(504, { error: 'Gateway Timeout' });
  lost.outcomeUnknown = true;
  const report = reportFailure(lost)!;
  assert.match(report.text, /outcome unknown: .*svc webhooks notifications PLATFORM/);
  assert.doesNotMatch(report.text, /svc api trades/);
  assert.equal(report.json.outcome_unknown, true);
});

test('a plain failure says nothing of the outcome', () => {
  const report = reportFailure(new SvcConnectionError('GET /trades: timed out', new Error('timeout')))!;
  assert.doesNotMatch(report.text, /outcome unknown/);
  assert.equal(report.json.outcome_unknown, undefined);
});

test("the operator API's 404 names what is missing; a bare 404 (another listener) asks whether the address is right", () => {
  const named = reportFailure(
    new AdminApiError(404, { error: 'Not Found', message: 'platform ZZZZZ9 not found' }),
  )!;
  assert.equal(named.text, 'error: the operator API answered 404: platform ZZZZZ9 not found');
  // Another server's page is not the operator API either (probe: printed without the hint).
  const page = reportFailure(new AdminApiError(404, '<html><body>404 Not Found</body></html>'))!;
  assert.match(page.text, /\n {2}no operator API answered: is --admin-url \(SVC_ADMIN_URL\) its address/);
  const fastify = reportFailure(
    new AdminApiError(404, {
      message: 'Route GET:/admin/platforms not found',
      error: 'Not Found',
      statusCode: 404,
    }),
  )!;
  assert.match(fastify.text, /\n {2}no operator API answered: /);
  const bare = reportFailure(new AdminApiError(404, { error: 'Not Found' }))!;
  assert.equal(
    bare.text,
    'error: the operator API answered 404: Not Found\n' +
      '  no operator API answered: is --admin-url (SVC_ADMIN_URL) its address (SVC_ADMIN_LISTEN when set)?',
  );
  assert.equal(bare.exitCode, 1);
  assert.equal(bare.json.not_operator_api, true);
  assert.equal(named.json.not_operator_api, undefined);
  // The public listener authenticates a path it has no route for before its 404 (wire-contract §9).
  const publicListener = reportFailure(new AdminApiError(401, { error: 'missing header X-SCX-API-KEY' }))!;
  assert.match(publicListener.text, /\n {2}no operator API answered: is --admin-url/);
  const firewall = reportFailure(new AdminApiError(403, 'error code: 1020'))!;
  assert.match(firewall.text, /\n {2}no operator API answered: is --admin-url/);
  const wrongToken = reportFailure(new AdminApiError(401, { error: 'invalid operator token' }))!;
  assert.doesNotMatch(wrongToken.text, /no operator API answered/);
  assert.equal(wrongToken.json.not_operator_api, undefined);
  assert.equal(publicListener.json.not_operator_api, true);
  assert.equal(firewall.json.not_operator_api, true);
});

test('a server unreachable is reported with the address that was tried', () => {
  const report = reportFailure(
    new SvcConnectionError('GET /time: ECONNREFUSED', new Error('refused'), 'http://127.0.0.1:8080'),
  )!;
  assert.equal(report.text, 'error: server unreachable at http://127.0.0.1:8080 (GET /time: ECONNREFUSED)');
});

test("a text answer (a proxy's error page) is shown shortened, with its length", () => {
  // Review: a 5 KB HTML 502 was printed whole, and twice with --json.
  const page = `<html><head><title>502 Bad Gateway</title></head><body>${'x'.repeat(5_000)}</body></html>`;
  const report = reportFailure(new AdminApiError(502, page))!;
  assert.equal(report.exitCode, 1);
  assert.ok(report.text.length < 600, `${report.text.length} characters`);
  assert.match(report.text, /<title>502 Bad Gateway<\/title>.*… \(5069 characters in all\)/);
  assert.deepEqual(report.json.errors, [`${page.slice(0, 300)}… (5069 characters in all)`]);
  assert.equal(report.json.body, page, 'the answer itself, whole, for a script');
  const short = reportFailure(new AdminApiError(502, 'Bad Gateway\n'))!;
  assert.deepEqual(short.json.errors, ['Bad Gateway']);
});

test('an operator write of unknown outcome names the read its command gave, also when the failure is explained', () => {
  // Review: a redelivery that failed part way (an explained failure) named every read instead of its own.
  const read = 'svc webhooks notifications PLATFORM';
  for (const wrap of [false, true]) {
    const lost = new AdminApiError(502, { error: 'Bad Gateway' });
    lost.outcomeUnknown = true;
    const error = wrap ? new ExplainedFailure(lost, 'redelivered 5 before this failure') : lost;
    const report = reportFailure(noteWhereSeen(error, read))!;
    assert.match(
      report.text,
      /look with svc webhooks notifications PLATFORM before repeating it/,
      String(wrap),
    );
  }
});
