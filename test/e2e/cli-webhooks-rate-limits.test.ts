import assert from 'node:assert/strict';
import { mkdtempSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { after, before, mock, test } from 'node:test';
import type { AdminClient } from '../../src/cli/admin-client.ts';
import { reportFailure } from '../../src/cli/error-report.ts';
import { OPERATOR_COMMANDS } from '../../src/cli/operator-commands.ts';
import { recordAnyNotification } from '../../src/domain/webhooks/outbox.ts';
import { runCli } from '../helpers/service-process.ts';
import { startTestService, TEST_ADMIN_TOKEN, type TestService } from '../helpers/test-service.ts';
import { fund, setPrices } from '../helpers/trades-fixtures.ts';

/**
 * Issue 9 point 6, the operator commands no other CLI test runs as a process: webhook configuration,
 * notifications and redelivery, rate limits inspect/lift, and trades book/advance (DESIGN §3). Each runs
 * as a real `svc` process against a live service (limit 2 requests per window, so a block is easy to make).
 */
let svc: TestService;
let env: Record<string, string | undefined>;

before(async () => {
  svc = await startTestService({
    // Each call of a redelivery since a time does one batch (5,000) and answers where to resume.
    env: { SVC_RATE_LIMIT: '2', SVC_RATE_LIMIT_BLOCK_MS: '60000', SVC_WEBHOOK_REDELIVER_CALL_MS: '0' },
  });
  env = {
    SVC_DATA_DIR: mkdtempSync(path.join(os.tmpdir(), 'svc-cli-ops-')),
    SVC_LOG_LEVEL: 'warn',
    SVC_URL: svc.url,
    SVC_ADMIN_TOKEN: TEST_ADMIN_TOKEN,
  };
});
after(() => svc?.close());

async function svcJson<T = Record<string, unknown>>(...args: string[]): Promise<T> {
  const result = await runCli([...args, '--json'], env);
  assert.equal(result.code, 0, `svc ${args.join(' ')}: ${result.stderr}`);
  return JSON.parse(result.stdout) as T;
}

test('webhooks set / show / notifications / notification / redeliver / redeliver-since', async () => {
  const { platform } = await svc.newPlatform();
  const code = platform.platform_code;
  const endpoint = await svcJson<{ url: string; secret_set: boolean; payload_types: string[] }>(
    ...['webhooks', 'set', code, 'http://127.0.0.1:9/hooks', '--secret', 's3cret'],
    ...['--types', 'participant_status_changed'],
  );
  assert.deepEqual(
    [endpoint.url, endpoint.secret_set, endpoint.payload_types],
    ['http://127.0.0.1:9/hooks', true, ['participant_status_changed']],
  );
  const shown = await svcJson<{ url: string; enabled: boolean }>('webhooks', 'show', code);
  assert.deepEqual([shown.url, shown.enabled], ['http://127.0.0.1:9/hooks', true]);
  // A secret rotated, and a pause, keep the rest.
  type Endpoint = { url: string; secret_set: boolean; payload_types: string[]; enabled: boolean };
  const updated = await svcJson<Endpoint>('webhooks', 'update', code, '--secret', 'rotated', '--disabled');
  assert.deepEqual(
    [updated.url, updated.secret_set, updated.payload_types, updated.enabled],
    ['http://127.0.0.1:9/hooks', true, ['participant_status_changed'], false],
  );
  const resumed = await svcJson<Endpoint>('webhooks', 'update', code, '--enabled');
  assert.deepEqual([resumed.payload_types, resumed.enabled], [['participant_status_changed'], true]);
  const nothing = await runCli(['webhooks', 'update', code], env);
  assert.equal(nothing.code, 2, nothing.stderr);
  assert.match(nothing.stderr, /give what changes/);

  const participant = (await svc.newParticipant(code)).participant_code;
  await svcJson('participants', 'set-status', participant, 'locked');
  const { notifications: listed } = await svcJson<{
    notifications: Array<{ notification_id: string; payload_type: string; payload: object }>;
  }>(...['webhooks', 'notifications', code, '--type', 'participant_status_changed']);
  assert.ok(listed.length >= 1);
  const mine = listed.find(
    (n) => (n.payload as { participant_code?: string }).participant_code === participant,
  );
  assert.ok(mine, 'the status change is listed');
  const one = await svcJson<{ notification_id: string; attempts: unknown[] }>(
    'webhooks',
    'notification',
    mine.notification_id,
  );
  assert.equal(one.notification_id, mine.notification_id);
  const redelivered = await svcJson<{ notification_id: string }>(
    'webhooks',
    'redeliver',
    mine.notification_id,
  );
  assert.equal(redelivered.notification_id, mine.notification_id);
  const since = await svcJson<{ redelivered: number }>('webhooks', 'redeliver-since', code, '--since', '0');
  assert.ok(since.redelivered >= 1);
  for (const iso of ['2099-01-01', '2099-01-01T00:00:00Z', '2099-01-01 00:00:00.5+02:00']) {
    const none = await svcJson<{ redelivered: number }>('webhooks', 'redeliver-since', code, '--since', iso);
    assert.equal(none.redelivered, 0, iso);
  }

  // A range bigger than one call takes: svc goes on where each call stopped, saying so, and prints the total.
  await svc.runtime.store.db.transaction().execute(async (trx) => {
    for (let i = 0; i < 10_001; i += 1)
      await recordAnyNotification(trx, {
        platformCode: code,
        payloadType: 'participant_status_changed',
        resourceKey: `participant:BULK${i % 50}`,
        payload: { i },
      });
  });
  const bulk = await runCli(['webhooks', 'redeliver-since', code, '--since', '0'], env);
  assert.equal(bulk.code, 0, bulk.stderr);
  assert.equal((JSON.parse(bulk.stdout) as { redelivered: number }).redelivered, 10_001 + since.redelivered);
  assert.deepEqual(bulk.stderr.trim().split('\n'), [
    'redelivered 5000 so far, going on',
    'redelivered 10000 so far, going on',
  ]);
  // With --json, stderr is kept for the one JSON object of an error (review: these lines came before it).
  const quiet = await runCli(['webhooks', 'redeliver-since', code, '--since', '0', '--json'], env);
  assert.equal(quiet.code, 0, quiet.stderr);
  assert.equal((JSON.parse(quiet.stdout) as { redelivered: number }).redelivered, 10_001 + since.redelivered);
  assert.equal(quiet.stderr, '');
  const window = await svcJson<{ redelivered: number }>(
    ...['webhooks', 'redeliver-since', code, '--since', '0', '--until', '2000-01-01'],
  );
  assert.equal(window.redelivered, 0, 'nothing was recorded before 2000');

  // A call that fails after others went through says where to go on, and --resume goes on from there.
  const stderr: string[] = [];
  const hooks = { url: 'http://127.0.0.1:9/hooks', payload_types: ['participant_status_changed'] };
  const failing = Object.create(svc.admin) as AdminClient;
  let calls = 0;
  failing.post = async <T>(target: string, body?: unknown): Promise<T> => {
    calls += 1;
    // The operator turns the webhook off between the first and second call: the second is refused.
    if (calls === 2)
      await svc.admin.put(`/platforms/${code}/webhook`, { url: 'http://127.0.0.1:9/hooks', enabled: false });
    return svc.admin.post<T>(target, body);
  };
  const redeliverSince = OPERATOR_COMMANDS['webhooks redeliver-since']!;
  const write = mock.method(process.stderr, 'write', (chunk: string) => stderr.push(chunk) > 0);
  let failure: unknown;
  try {
    await redeliverSince.run(failing, [code], { since: '0' }).catch((error: unknown) => (failure = error));
  } finally {
    write.mock.restore();
  }
  const report = reportFailure(failure)!;
  assert.equal(report.exitCode, 1);
  assert.match(report.text, /webhook/);
  const hint =
    /\n {2}redelivered 5000 before this failure; to go on where it stopped, run the same command with --resume (\d+-\d+)$/.exec(
      report.text,
    );
  assert.ok(hint, report.text);
  assert.deepEqual([report.json.redelivered, report.json.resume], [5000, hint[1]], 'for --json, as fields');
  assert.deepEqual(stderr, ['redelivered 5000 so far, going on\n']);
  // Resumed already, the command has a --resume: the next one goes in its place (review: a second was refused).
  await svc.admin.put(`/platforms/${code}/webhook`, hooks);
  calls = 0;
  let again: unknown;
  await redeliverSince
    .run(failing, [code], { since: '0', resume: hint[1]!, json: true })
    .catch((error: unknown) => (again = error));
  assert.match(
    reportFailure(again)!.text,
    /\n {2}redelivered 5000 before this failure; to go on where it stopped, run the same command with --resume \d+-\d+ in place of the one it has$/,
  );
  await svc.admin.put(`/platforms/${code}/webhook`, hooks);
  const rest = await svcJson<{ redelivered: number }>(
    ...['webhooks', 'redeliver-since', code, '--since', '0', '--resume', hint[1]!],
  );
  assert.equal(rest.redelivered, 10_001 + since.redelivered - 5_000, 'the rest, and only the rest');

  // A server from before redeliveries went in calls answers the whole range without `complete` (a rolling deploy).
  const older = Object.create(svc.admin) as AdminClient;
  older.post = async <T>(target: string, body?: unknown): Promise<T> => {
    const { redelivered } = await svc.admin.post<{ redelivered: number }>(target, body);
    return { redelivered } as T;
  };
  assert.deepEqual(await redeliverSince.run(older, [code], { since: '0', until: '2000-01-01' }), {
    redelivered: 0,
  });
  // "Not complete" with no resume point, after calls that went through: reported with where the last one left off
  // (review: the progress was dropped).
  const broken = Object.create(svc.admin) as AdminClient;
  let brokenCalls = 0;
  broken.post = async <T>(): Promise<T> =>
    (++brokenCalls === 1
      ? { redelivered: 5, complete: false, resume: '1-2' }
      : { redelivered: 3, complete: false }) as T;
  let brokenFailure: unknown;
  await redeliverSince
    .run(broken, [code], { since: '0', json: true })
    .catch((error: unknown) => (brokenFailure = error));
  assert.match(
    reportFailure(brokenFailure)!.text,
    /^error: the operator API answered 200: .*\n {2}redelivered 5 before this failure; to go on where it stopped, run the same command with --resume 1-2$/s,
  );

  // Usage errors (exit 2), sent nowhere: flags that exclude each other, and a time that could be either.
  for (const [args, error] of [
    [
      ['webhooks', 'set', code, 'http://127.0.0.1:9/hooks', '--types', 'trade_status_changed', '--all-types'],
      '--types and --all-types exclude each other',
    ],
    [
      ['webhooks', 'redeliver-since', code, '--since', '0', '--until', '1733443200'],
      '--until: "1733443200" looks like epoch seconds; give epoch ms (1733443200000)',
    ],
    [
      ['webhooks', 'redeliver-since', code, '--since', '2026'],
      '--since: "2026" could be epoch ms or an ISO 8601 date; give epoch ms in full, or the date with dashes (2026-12-01)',
    ],
    // Date.parse reads these as dates in 2001, before every notification: all would go out again.
    ...['-5', '1.5', 'x 1', '5 ', '12/1', '2026-02-30', '2026-02-31T10:00:00Z'].map(
      (since) =>
        [
          ['webhooks', 'redeliver-since', code, '--since', since],
          `--since: "${since}" is neither epoch ms nor an ISO 8601 time`,
        ] as const,
    ),
  ] as const) {
    const refused = await runCli([...args], env);
    assert.equal(refused.code, 2, refused.stderr);
    assert.equal(refused.stderr.trim(), `error: ${error}`);
  }
  const unchanged = await svcJson<{ payload_types: string[] }>('webhooks', 'show', code);
  assert.deepEqual(unchanged.payload_types, ['participant_status_changed']);
});

test('rate-limits show / unblock: a blocked IP is seen and let through again', async () => {
  const { key } = await svc.newPlatform();
  const statuses: number[] = [];
  for (let i = 0; i < 3; i++) statuses.push((await fetch(`${svc.url}/time`)).status);
  assert.deepEqual(statuses, [200, 200, 429]);
  const blocked = await svcJson<{ ip: string; blocked: boolean; retry_after_seconds: number }>(
    'rate-limits',
    'show',
    '127.0.0.1',
  );
  assert.deepEqual([blocked.ip, blocked.blocked], ['127.0.0.1', true]);
  assert.ok(blocked.retry_after_seconds > 0);
  const lifted = await svcJson<{ blocked: boolean; count: number }>('rate-limits', 'unblock', '127.0.0.1');
  assert.deepEqual([lifted.blocked, lifted.count], [false, 0]);
  // And the platform calls get through again, signed with the platform's key.
  const time = await runCli(['api', 'time', '--json'], {
    ...env,
    SVC_API_KEY: key.api_key,
    SVC_API_SECRET: key.api_secret,
    SVC_PASSPHRASE: key.passphrase,
  });
  assert.equal(time.code, 0, time.stderr);
});

test('trades book / advance: a trade booked by the operator settles step by step', async () => {
  const { platform } = await svc.newPlatform();
  const participant = (await svc.newParticipant(platform.platform_code)).participant_code;
  await setPrices(svc, { 'BTC/USD': '20000' });
  await fund(svc, participant, 'USD', '1000');
  const booked = await svcJson<{ trade_id: string; trade_state: string }>(
    ...['trades', 'book', '--platform', platform.platform_code, '--participant', participant],
    ...[
      '--side',
      'buy',
      '--underlying',
      'BTC',
      '--quoted-currency',
      'USD',
      '--quantity',
      '0.01',
      '--price',
      '20000',
    ],
  );
  assert.equal(booked.trade_state, 'accepted');
  const active = await svcJson<{ trade_state: string }>('trades', 'advance', booked.trade_id);
  const terminated = await svcJson<{ trade_state: string }>('trades', 'advance', booked.trade_id);
  assert.deepEqual([active.trade_state, terminated.trade_state], ['active', 'terminated']);
});
