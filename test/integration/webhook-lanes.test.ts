import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { sql } from 'kysely';
import { adoptLanes, claimLane, releaseLane } from '../../src/domain/webhooks/webhooks.repository.ts';
import { startTestService, type TestService } from '../helpers/test-service.ts';
import { record } from '../helpers/webhook-receiver.ts';

/**
 * The lane statements on their own (no worker runs here): a late lane job adopts waiting lanes only where
 * per-resource order and the leases allow, and takes their queued jobs with them; a release queues a lane
 * again for what is left.
 */
let svc: TestService;
before(async () => {
  svc = await startTestService();
});
after(() => svc?.close());

const db = () => svc.runtime.store.db;
const LEASE_MS = 16_000;

async function laneJobs(code: string): Promise<string[]> {
  const r = await sql<{ key: string }>`select key from graphile_worker.jobs
    where key like ${`webhooks:lane:${code}:%`} order by key`.execute(db());
  return r.rows.map((row) => row.key.slice(`webhooks:lane:${code}:`.length));
}

test('adoption takes due lane heads nobody works, oldest first, with their queued jobs', async () => {
  const { platform } = await svc.newPlatform();
  const code = platform.platform_code;
  await svc.admin.put(`/platforms/${code}/webhook`, { url: 'http://127.0.0.1:9/unused' });
  const ids = new Map<string, string>();
  for (const key of ['trade:A', 'trade:B', 'trade:C', 'trade:D', 'trade:E']) {
    ids.set(key, await record(db(), code, key, { key }));
  }
  await record(db(), code, 'trade:B', { second: true });
  assert.deepEqual(await laneJobs(code), ['trade:A', 'trade:B', 'trade:C', 'trade:D', 'trade:E']);

  // C waits for a retry (its head is not due); D is held by another worker's lease.
  await sql`update webhook_notifications set status = 'retrying', next_attempt_at = now() + interval '1 hour'
    where platform_code = ${code} and resource_key = 'trade:C'`.execute(db());
  assert.equal(
    (await claimLane(db(), { platformCode: code, resourceKey: 'trade:D' }, 'other', LEASE_MS)).claimed,
    true,
  );

  const first = await adoptLanes(db(), 'adopter', LEASE_MS, 2);
  assert.deepEqual(
    first.map((a) => a.lane.resourceKey),
    ['trade:A', 'trade:B'],
    'the two oldest due heads',
  );
  assert.equal(
    first[1]!.head?.notification_id,
    ids.get('trade:B'),
    "B's oldest notification, not its later one",
  );
  const leases = await sql<{ resource_key: string; owner: string }>`select resource_key, owner
    from webhook_delivery_leases where platform_code = ${code} order by resource_key`.execute(db());
  assert.deepEqual(leases.rows, [
    { resource_key: 'trade:A', owner: 'adopter' },
    { resource_key: 'trade:B', owner: 'adopter' },
    { resource_key: 'trade:D', owner: 'other' },
  ]);
  // A's and B's jobs went with them; C's (not due), D's (held) and E's stay queued.
  assert.deepEqual(await laneJobs(code), ['trade:C', 'trade:D', 'trade:E']);

  const second = await adoptLanes(db(), 'adopter', LEASE_MS, 10);
  assert.deepEqual(
    second.map((a) => a.lane.resourceKey),
    ['trade:E'],
    'not C (retry not due), not D (leased), not A or B (leased by us)',
  );

  // Releasing B, still undelivered, queues B's job again.
  await releaseLane(db(), { platformCode: code, resourceKey: 'trade:B' }, 'adopter');
  assert.ok((await laneJobs(code)).includes('trade:B'));
});
