import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { parseArgs } from 'node:util';
import { AdminClient } from '../../src/cli/admin-client.ts';
import { OPERATOR_COMMANDS, OPERATOR_OPTIONS } from '../../src/cli/operator-commands.ts';
import type { IssuedApiKey, Platform, Participant } from '../../src/contract/admin.schemas.ts';
import type { AdminTrade } from '../../src/contract/trades.schemas.ts';
import type { WebhookNotification } from '../../src/contract/webhooks.schemas.ts';
import { createClient } from '../../src/sdk/platform.ts';
import { startTestService, TEST_ADMIN_TOKEN, type TestService } from '../helpers/test-service.ts';

/**
 * Issue 9 point 6, DESIGN §3: the operator CLI covers the whole operator API. Every `svc` operator command
 * runs (in this process, with the CLI's own option parser) against the real service through an AdminClient
 * that notes the route of each call; together they must call every `/admin` route of the server's OpenAPI
 * document, and each command must call what its usage says.
 */
let svc: TestService;

/** The real operator client, noting each call as "METHOD /admin/route/{param}". */
class RecordingAdminClient extends AdminClient {
  readonly routes: string[] = [];
  readonly params = new Map<string, string>();
  override async answer<A extends { message: unknown }>(
    method: string,
    path: string,
    body?: unknown,
  ): Promise<A> {
    const route = path
      .split('?', 1)[0]!
      .split('/')
      .map((segment) => this.params.get(decodeURIComponent(segment)) ?? segment)
      .join('/');
    this.routes.push(`${method} /admin${route}`);
    return super.answer<A>(method, path, body);
  }
}

before(async () => {
  svc = await startTestService();
});
after(() => svc?.close());

test('the operator commands call every /admin route of the OpenAPI document', async () => {
  const admin = new RecordingAdminClient(svc.url, TEST_ADMIN_TOKEN);
  const used = new Set<string>();
  const svcCommand = async <T>(line: string): Promise<T> => {
    const { values, positionals } = parseArgs({
      args: line.split(' '),
      allowPositionals: true,
      options: OPERATOR_OPTIONS,
    });
    const name = `${positionals[0]} ${positionals[1]}`;
    const command = OPERATOR_COMMANDS[name];
    assert.ok(command, `svc ${name} exists`);
    used.add(name);
    const before = admin.routes.length;
    try {
      return (await command.run(admin, positionals.slice(2), values)) as T;
    } finally {
      // A write names the read that shows whether it was carried out, for when its answer is lost (review: a
      // balance adjustment was told to look at the platforms, keys and prices); a read names none.
      const writes = admin.routes.slice(before).filter((route) => !route.startsWith('GET '));
      assert.equal(command.seenWith !== undefined, writes.length > 0, `svc ${name}: ${writes.join(', ')}`);
      const [, group, verb] = command.seenWith?.split(' ') ?? [];
      if (command.seenWith)
        assert.ok(
          group === 'api' || OPERATOR_COMMANDS[`${group} ${verb}`],
          `svc ${name}: ${command.seenWith}`,
        );
    }
  };

  const platform = await svcCommand<Platform>('platforms create --name Coverage --allow 127.0.0.1/32');
  admin.params.set(platform.platform_code, '{code}');
  await svcCommand('platforms list');
  await svcCommand(`platforms show ${platform.platform_code}`);
  await svcCommand(
    `platforms update ${platform.platform_code} --deposit-fee-bps 5 --quote-expiry-ms default`,
  );
  await svcCommand(`allowlist set ${platform.platform_code} 127.0.0.1/32 ::1/128`);
  const key = await svcCommand<IssuedApiKey>(`keys create ${platform.platform_code}`);
  admin.params.set(key.api_key, '{api_key}');
  await svcCommand(`keys list ${platform.platform_code}`);
  await svcCommand(`webhooks set ${platform.platform_code} http://127.0.0.1:9/hooks --secret s3cret`);
  await svcCommand(`webhooks show ${platform.platform_code}`);
  await svcCommand(`webhooks update ${platform.platform_code} --secret s4cret --types trade_status_changed`);
  const participant = await svcCommand<Participant>(
    `participants create --platform ${platform.platform_code} --email cover@example.com --first-name C --last-name Over`,
  );
  admin.params.set(participant.participant_code, '{code}');
  await svcCommand('participants find --email cover@example.com');
  await svcCommand(`participants show ${participant.participant_code}`);
  await svcCommand(`participants set-status ${participant.participant_code} approved`);
  await svcCommand(
    `accounts create --platform ${platform.platform_code} --participant ${participant.participant_code}`,
  );
  await svcCommand('prices set BTC/USD=20000 USDC/USD=1');
  await svcCommand('prices list');
  await svcCommand(
    `balances adjust --participant ${participant.participant_code} --label general --asset USD --amount 1000`,
  );
  await svcCommand(`balances show ${participant.participant_code} --asset USD`);
  const client = createClient({ baseUrl: svc.url, ...keyCredentials(key), retry: false });
  const { deposit_address: address } = await client.funding.requestQuote({
    participant_code: participant.participant_code,
    fund_asset: 'USDC.ETH',
  });
  await svcCommand(`deposits record ${address} 5 --fund-asset USDC.ETH`);
  await svcCommand(`deposits find --address ${address} --participant ${participant.participant_code}`);
  admin.params.set(address, '{address}');
  await svcCommand(`deposits address ${address}`);
  const trade = await svcCommand<AdminTrade>(
    `trades book --platform ${platform.platform_code} --participant ${participant.participant_code} --side buy --underlying BTC --quoted-currency USD --quantity 0.001 --price 20000`,
  );
  admin.params.set(trade.trade_id, '{trade_id}');
  await svcCommand(`trades show ${trade.trade_id}`);
  await svcCommand(`trades list --platform ${platform.platform_code} --state accepted`);
  await svcCommand(`trades advance ${trade.trade_id}`);
  admin.params.set('127.0.0.1', '{ip}');
  await svcCommand('rate-limits show 127.0.0.1');
  await svcCommand('rate-limits unblock 127.0.0.1');
  const {
    notifications: [notification],
  } = await svcCommand<{ notifications: WebhookNotification[] }>(
    `webhooks notifications ${platform.platform_code}`,
  );
  assert.ok(notification, 'the changes above were recorded as notifications');
  admin.params.set(notification.notification_id, '{id}');
  await svcCommand(`webhooks notification ${notification.notification_id}`);
  await svcCommand(`webhooks redeliver ${notification.notification_id}`);
  await svcCommand(`webhooks redeliver-since ${platform.platform_code} --since 0`);
  await svcCommand(`keys revoke ${key.api_key}`);

  assert.deepEqual([...used].sort(), Object.keys(OPERATOR_COMMANDS).sort(), 'every command was run');
  const doc = (await (await fetch(`${svc.url}/docs/json`)).json()) as {
    paths: Record<string, Record<string, unknown>>;
  };
  const adminRoutes = Object.entries(doc.paths)
    .filter(([path]) => path.startsWith('/admin/'))
    .flatMap(([path, methods]) => Object.keys(methods).map((m) => `${m.toUpperCase()} ${path}`));
  assert.ok(
    adminRoutes.length >= 20,
    `the OpenAPI document lists the operator routes (${adminRoutes.length})`,
  );
  assert.deepEqual([...new Set(admin.routes)].sort(), [...new Set(adminRoutes)].sort());
});

function keyCredentials(key: IssuedApiKey) {
  return { apiKey: key.api_key, apiSecret: key.api_secret, passphrase: key.passphrase };
}
