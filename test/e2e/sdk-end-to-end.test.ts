import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { after, before, test } from 'node:test';
import { endToEnd, startWebhookReceiver, type WebhookReceiver } from '../../examples/end-to-end.ts';
import { createClient } from 'svc-platform/sdk';
import { PROJECT_ROOT } from '../helpers/service-process.ts';
import { startTestService, type TestService } from '../helpers/test-service.ts';
import { balanceOf } from '../helpers/trades-fixtures.ts';

/**
 * Issue 9 point 5: the README's complete example is `examples/end-to-end.ts`, run here against the real
 * service with its worker (accounts, tenant changes, settlement and webhook delivery all run for real),
 * and the README quotes its code word for word.
 */
const SECRET = 'end-to-end-webhook-secret';
let svc: TestService;
let webhooks: WebhookReceiver;

before(async () => {
  svc = await startTestService({
    env: {
      SVC_ROLE: 'all',
      SVC_SETTLEMENT_ACTIVE_AFTER_MS: '100',
      SVC_SETTLEMENT_TERMINATE_AFTER_MS: '100',
      SVC_WEBHOOK_FAST_RETRY_DELAY_MS: '10',
      SVC_WEBHOOK_RETRY_SCHEDULE: '50ms',
    },
  });
  webhooks = await startWebhookReceiver(SECRET);
  await svc.admin.post('/prices', { pairs: { 'BTC/USD': '20000', 'USDC/USD': '1' } });
});
after(async () => {
  await webhooks?.close();
  await svc?.close();
});

test('the README example runs: customer, account, tenant, funding with a reference, trade, webhooks', async () => {
  const { platform, key } = await svc.newPlatform();
  // What the operator does for the platform: its webhook, with the secret the receiver verifies with.
  await svc.admin.put(`/platforms/${platform.platform_code}/webhook`, { url: webhooks.url, secret: SECRET });
  const client = createClient({
    baseUrl: svc.url,
    apiKey: key.api_key,
    apiSecret: key.api_secret,
    passphrase: key.passphrase,
  });
  let shown = '';
  const result = await endToEnd(client, webhooks, async (address) => {
    shown = address;
    // The blockchain's part: 100 USDC arrive at the address (what a chain indexer reports to the operator API).
    await svc.admin.post('/deposits', { deposit_address: address, quantity: '100', fund_asset: 'USDC.ETH' });
  });

  assert.equal(result.depositAddress, shown);
  assert.match(result.depositAddress, /^0x[0-9a-fA-F]{40}$/);
  const details = await client.accounts.details(result.zrn);
  assert.equal(details.participant_code, result.holder);
  assert.deepEqual(details.tenants, [result.tenant]);
  assert.equal(result.fundEvent.success, true);
  assert.equal(result.fundEvent.participant_code, result.holder);
  const trade = await client.trades.get(result.tradeId);
  assert.equal(trade.trade_state, 'terminated');
  // 50 USD at 20,000 USD/BTC; the ledger agrees with the balance webhook.
  assert.equal(result.btcBalance, '0.0025');
  assert.equal(await balanceOf(svc, result.holder, 'BTC'), '0.0025');
});

test('the README quotes the example’s code word for word', () => {
  const example = readFileSync(path.join(PROJECT_ROOT, 'examples/end-to-end.ts'), 'utf8');
  const region = /\/\/ #region end-to-end\n([\s\S]*?)\/\/ #endregion end-to-end/.exec(example)?.[1];
  assert.ok(region, 'the example marks the quoted region');
  const readme = readFileSync(path.join(PROJECT_ROOT, 'README.md'), 'utf8');
  assert.ok(
    readme.includes(region.trimEnd()),
    'README.md contains examples/end-to-end.ts#end-to-end verbatim',
  );
});
