import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { Webhook } from 'standardwebhooks';
// As a receiver imports it: the SDK's own export (README "Receiver side").
import { standardWebhooksSecret } from 'svc-platform/sdk';
import type { WebhookNotification } from '../../src/contract/webhooks.schemas.ts';
import { startTestService, type TestService } from '../helpers/test-service.ts';
import { runCli } from '../helpers/service-process.ts';
import { serviceEnv } from '../helpers/webhook-processes.ts';
import { notificationState, record, waitFor } from '../helpers/webhook-receiver.ts';

/**
 * Issue 4 point 6, receiver side: real deliveries from the service's worker are verified by
 * `svc webhooks listen` (the CLI's local receiver, which uses the SDK's verifyWebhook) and by the
 * `standardwebhooks` npm package.
 */
const SECRET = 'receiver-side-secret-42';
let svc: TestService;
const children: ChildProcess[] = [];
before(async () => {
  svc = await startTestService({
    env: { SVC_ROLE: 'all', SVC_WEBHOOK_FAST_RETRY_DELAY_MS: '10', SVC_WEBHOOK_RETRY_SCHEDULE: '20ms' },
  });
});
after(async () => {
  for (const child of children) child.kill('SIGTERM');
  await svc?.close();
});

const db = () => svc.runtime.store.db;

/** `svc webhooks listen --port 0 --secret S --json` as a child process; resolves with its URL. */
async function startListener(secret: string) {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', 'src/main/cli.ts', 'webhooks', 'listen', '--port', '0', '--secret', secret, '--json'],
    {
      cwd: path.resolve(import.meta.dirname, '../..'),
      env: serviceEnv(svc),
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  );
  children.push(child);
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (c: Buffer) => (stdout += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (stderr += c.toString()));
  const url = await waitFor(() => /receiving on (http:\/\/\S+)/.exec(stderr)?.[1], 'the listener', 60_000);
  return {
    url,
    events: () =>
      stdout
        .split('\n')
        .filter(Boolean)
        .map(
          (line) =>
            JSON.parse(line) as {
              notification_id: string;
              payload_type: string;
              duplicate: boolean;
              payload: unknown;
            },
        ),
    stderr: () => stderr,
  };
}

async function platformWithWebhook(url: string) {
  const { platform } = await svc.newPlatform();
  await svc.admin.put(`/platforms/${platform.platform_code}/webhook`, { url, secret: SECRET });
  return platform.platform_code;
}

test('svc webhooks listen verifies and prints real deliveries', async () => {
  const listener = await startListener(SECRET);
  const code = await platformWithWebhook(listener.url);
  const sent = [
    {
      type: 'trade_status_changed' as const,
      key: 'trade:L1',
      payload: { trade_id: 'L1', trade_state: 'accepted' },
    },
    {
      type: 'account_balance.changed' as const,
      key: 'balance:B1',
      payload: { balance: '10.5', asset: 'USD' },
    },
    {
      type: 'participant_status_changed' as const,
      key: 'participant:P1',
      payload: { participant_status: 'approved' },
    },
  ];
  const ids: string[] = [];
  for (const s of sent) ids.push(await record(db(), code, s.key, s.payload, s.type));
  const events = await waitFor(
    () => (listener.events().length >= sent.length ? listener.events() : null),
    'the printed events',
  );
  assert.deepEqual(
    events.map((e) => [e.notification_id, e.payload_type, e.duplicate, e.payload]).sort(),
    sent.map((s, i) => [ids[i], s.type, false, s.payload]).sort(),
  );
  for (const id of ids) {
    await waitFor(async () => (await notificationState(db(), id))?.status === 'delivered', 'delivered');
  }
  // A redelivery is printed again, marked as a duplicate (same notification id).
  await svc.admin.post(`/notifications/${ids[0]}/redeliver`);
  await waitFor(
    () => listener.events().find((e) => e.notification_id === ids[0] && e.duplicate),
    'the duplicate',
  );
});

test('a listener with another secret refuses the deliveries (400), which the service records as failed', async () => {
  const listener = await startListener('not-the-configured-secret');
  const code = await platformWithWebhook(listener.url);
  const id = await record(db(), code, 'trade:WRONG');
  await waitFor(async () => (await notificationState(db(), id))?.status === 'dead', 'dead letter');
  assert.deepEqual(listener.events(), []);
  // Under --json, as JSON lines.
  assert.match(listener.stderr(), /^\{"refused":"invalid_signature","header":[^\n]*"message":"[^"]+"\}$/m);
  const view = await svc.admin.get<WebhookNotification>(`/notifications/${id}`);
  assert.ok(view.attempts.length > 1 && view.attempts.every((a) => a.status_code === 400));
});

test('a request that is no delivery (not a POST, a body over 1 MiB) is refused and the refusal printed', async () => {
  // Probe: the 405 and the 413 were answered and never shown, while every other refusal is.
  const listener = await startListener(SECRET);
  const get = await fetch(listener.url);
  assert.equal(get.status, 405);
  const big = await fetch(listener.url, { method: 'POST', body: 'x'.repeat(1024 * 1024 + 1) }).then(
    (res) => res.status,
    () => 'reset', // the listener stops reading once it has answered
  );
  assert.ok(big === 413 || big === 'reset', String(big));
  const lines = await waitFor(() => {
    const refusals = listener
      .stderr()
      .split('\n')
      .filter((line) => line.startsWith('{'))
      .map((line) => JSON.parse(line) as { refused: string; header: null; message: string });
    return refusals.length >= 2 ? refusals : null;
  }, 'the printed refusals');
  assert.deepEqual(
    lines.map((l) => [l.refused, l.header]),
    [
      ['method_not_allowed', null],
      ['body_too_large', null],
    ],
  );
  assert.match(lines[0]!.message, /^GET \/: deliveries are POSTs \(answered 405\)$/);
  assert.deepEqual(listener.events(), []);
});

test('the standardwebhooks npm package verifies real deliveries with whsec_ + base64(secret)', async () => {
  const verifier = new Webhook(standardWebhooksSecret(SECRET));
  const verified: unknown[] = [];
  const server = createServer((req, res) => {
    let body = '';
    req.on('data', (c: Buffer) => (body += c.toString()));
    req.on('end', () => {
      try {
        const headers = Object.fromEntries(Object.entries(req.headers).map(([k, v]) => [k, String(v)]));
        verified.push(verifier.verify(body, headers));
        res.writeHead(200).end();
      } catch {
        res.writeHead(400).end();
      }
    });
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  try {
    const code = await platformWithWebhook(`http://127.0.0.1:${(server.address() as AddressInfo).port}/sw`);
    const ids = [
      await record(db(), code, 'fund:F1', { fund_id: 'F1', success: true }, 'deposit_fund_complete'),
      await record(
        db(),
        code,
        'account:A1',
        { zrn: 'zrn:svc:us:account:customer:x' },
        'customer_account_status_changed',
      ),
    ];
    for (const id of ids) {
      await waitFor(async () => (await notificationState(db(), id))?.status === 'delivered', 'delivered');
      const view = await svc.admin.get<WebhookNotification>(`/notifications/${id}`);
      assert.equal(view.attempts.length, 1, 'verified on the first attempt');
    }
    // Two lanes: either may arrive first.
    assert.deepEqual(verified.map((v) => JSON.stringify(v)).sort(), [
      JSON.stringify({ fund_id: 'F1', success: true }),
      JSON.stringify({ zrn: 'zrn:svc:us:account:customer:x' }),
    ]);
  } finally {
    server.closeAllConnections();
    await new Promise((r) => server.close(r));
  }
});

test('a listener whose port is taken says so on one line, with exit code 1, and no stack trace', async () => {
  const taken = await startListener(SECRET);
  const port = new URL(taken.url).port;
  const { code, stderr } = await runCli(['webhooks', 'listen', '--port', port, '--secret', SECRET], {});
  assert.equal(code, 1);
  assert.equal(
    stderr.trim(),
    `error: --host/--port: cannot listen on 127.0.0.1:${port}: the address is already in use (another process listens there)`,
  );
});

test('a listener whose host does not resolve says so on one line, with exit code 1, and no stack trace', async () => {
  const { code, stderr } = await runCli(
    ['webhooks', 'listen', '--port', '0', '--secret', SECRET, '--host', 'nohost.invalid'],
    {},
  );
  assert.equal(code, 1);
  assert.match(stderr.trim(), /^error: --host: cannot resolve the host name "nohost\.invalid" \(E[A-Z_]+\)$/);
});

test('a listener refused an IPv6 address names it as a URL would, with no port it did not ask for', async () => {
  // A link-local address without its interface cannot be listened on (EINVAL); on a machine without IPv6 the
  // refusal is another, named the same way. The port (0: any) was printed as "undefined" after the address.
  const { code, stderr } = await runCli(
    ['webhooks', 'listen', '--port', '0', '--secret', SECRET, '--host', 'fe80::1'],
    {},
  );
  assert.equal(code, 1);
  assert.match(stderr.trim(), /^error: --host\/--port: cannot listen on \[fe80::1\]: \S/);
  assert.doesNotMatch(stderr, /undefined/);
});
