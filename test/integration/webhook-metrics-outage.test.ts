import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { Registry } from 'prom-client';
import { createWebhookMetrics } from '../../src/domain/webhooks/webhooks.metrics.ts';
import { createStore, type Store } from '../../src/store/database.ts';
import { createTestDatabase, type TestDatabase } from '../helpers/database.ts';
import { startTcpProxy, type TcpProxy } from '../helpers/tcp-proxy.ts';
import { record } from '../helpers/webhook-receiver.ts';

/**
 * /metrics while the database is away (DESIGN §6): the webhook queue gauges are read from the database at
 * scrape time; a failed read used to fail the whole scrape, the rate-limit fallback and process metrics with
 * it. Now the last numbers read are shown, with their age.
 */
let database: TestDatabase;
let proxy: TcpProxy;
let store: Store;
before(async () => {
  database = await createTestDatabase();
  proxy = await startTcpProxy(database.url);
  store = createStore(proxy.url, { max: 2 });
});
after(async () => {
  await store?.close();
  await proxy?.close();
  await database?.drop();
});

const value = (text: string, name: string) => Number(new RegExp(`^${name} (\\S+)$`, 'm').exec(text)?.[1]);

test('the queue gauges keep their last numbers, and say how old they are, while the database is away', async () => {
  // The test database is migrated already; one pending notification, written directly.
  const direct = createStore(database.url, { max: 1 });
  await direct.db.insertInto('platforms').values({ platform_code: 'MTR001', name: 'metrics' }).execute();
  await direct.db
    .insertInto('webhook_endpoints')
    .values({ platform_code: 'MTR001', url: 'http://127.0.0.1:9/hooks', enabled: true })
    .execute();
  await record(direct.db, 'MTR001', 'trade:1');

  const registry = new Registry();
  // Read at every scrape (no 1 s cache), so that the test needs no waiting.
  createWebhookMetrics(store.db, { statsCacheMs: 0 }).register(registry);
  const before = await registry.metrics();
  assert.equal(value(before, 'svc_webhook_pending'), 1);
  const freshAge = value(before, 'svc_webhook_queue_stats_age_seconds');
  assert.ok(freshAge >= 0 && freshAge < 1, String(freshAge));

  await proxy.down();
  const during = await registry.metrics(); // resolves: no rejection for the whole scrape
  assert.equal(value(during, 'svc_webhook_pending'), 1, 'the last number read');
  assert.match(during, /^svc_webhook_dead 0$/m, 'every queue gauge is there');
  assert.ok(value(during, 'svc_webhook_queue_stats_age_seconds') >= freshAge, 'and its age');

  await proxy.up();
  // Written on the direct connection: the proxied pool may still hold a connection the outage killed.
  await record(direct.db, 'MTR001', 'trade:2');
  await direct.close();
  const after = await registry.metrics();
  assert.equal(value(after, 'svc_webhook_pending'), 2, 'read again once the database is back');
});

test('before the first read the queue gauges say NaN (unknown), not 0 (an empty queue), and their age -1', async () => {
  await proxy.down();
  const away = createStore(proxy.url, { max: 1 });
  try {
    const registry = new Registry();
    createWebhookMetrics(away.db, { statsCacheMs: 0 }).register(registry);
    const text = await registry.metrics();
    for (const name of ['pending', 'retrying', 'dead', 'oldest_pending_age_seconds'])
      // prom-client writes NaN as "Nan"; Prometheus reads either (Go's ParseFloat ignores case).
      assert.match(text, new RegExp(`^svc_webhook_${name} nan$`, 'mi'), name);
    assert.equal(value(text, 'svc_webhook_queue_stats_age_seconds'), -1);
  } finally {
    await proxy.up();
    await away.close();
  }
});
