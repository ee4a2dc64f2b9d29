import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { createClient } from '../../src/sdk/index.ts';
import { AccountsResource } from '../../src/sdk/resources/accounts.ts';
import { SvcConflictError, SvcServerError } from '../../src/sdk/errors.ts';
import { startTestService, type TestService } from '../helpers/test-service.ts';

/**
 * The SDK's accounts resource against the real service in cert: after an indeterminate 502/504 (spec
 * 7.1.2) the tenant methods run their idempotence check (the details) instead of resending blindly.
 */
let svc: TestService;
before(async () => {
  svc = await startTestService();
});
after(() => svc?.close());

const noWait = { sleep: async () => {} };

async function account() {
  const { platform, client } = await svc.newPlatform();
  const holder = (await svc.newParticipant(platform.platform_code)).participant_code;
  const tenant = (await svc.newParticipant(platform.platform_code)).participant_code;
  const { zrn } = await svc.newCustomerAccount(platform.platform_code, holder);
  return { platformCode: platform.platform_code, sdk: new AccountsResource(client), zrn, tenant };
}

test('addTenant: a 502 after the work was done is recognised by the idempotence check, not resent', async () => {
  const { sdk, zrn, tenant } = await account();
  const answer = await sdk.addTenant(zrn, tenant, {
    headers: { 'X-Simulator-Scenario': 'error_502_after' },
    retry: noWait,
  });
  assert.deepEqual(answer, {});
  const details = await sdk.details(zrn);
  assert.deepEqual(
    details.pending_tenant_changes.map((c) => [c.participant_code, c.change]),
    [[tenant, 'add']],
  );
});

test('addTenant: a 502 before any work is resent, and fails with the 502 once the budget is spent', async () => {
  const { sdk, zrn, tenant } = await account();
  await assert.rejects(
    sdk.addTenant(zrn, tenant, { headers: { 'X-Simulator-Scenario': 'error_502' }, retry: noWait }),
    (error: unknown) => error instanceof SvcServerError && error.status === 502,
  );
  assert.deepEqual((await sdk.details(zrn)).pending_tenant_changes, []);
});

test('removeTenant: a 504 after the work was done is recognised by the idempotence check', async () => {
  const { platformCode, sdk, zrn, tenant } = await account();
  await sdk.addTenant(zrn, tenant);
  await svc.runtime.services.tenants.applyPending(platformCode, zrn);
  const answer = await sdk.removeTenant(zrn, tenant, {
    headers: { 'X-Simulator-Scenario': 'error_504_after' },
    retry: noWait,
  });
  assert.deepEqual(answer, {});
  assert.deepEqual(
    (await sdk.details(zrn)).pending_tenant_changes.map((c) => [c.participant_code, c.change]),
    [[tenant, 'remove']],
  );
});

test('a tenant change whose first attempt lands after the check looked: the refused resend is checked again, accepted', async () => {
  // The race of a timeout: the first request reaches the server only after the SDK's check found nothing, and the
  // resend is refused as a repeat (409: already a tenant, or its removal pending). The first attempt did the work.
  const { platform, key } = await svc.newPlatform();
  const holder = (await svc.newParticipant(platform.platform_code)).participant_code;
  const tenant = (await svc.newParticipant(platform.platform_code)).participant_code;
  const { zrn } = await svc.newCustomerAccount(platform.platform_code, holder);
  let held: (() => Promise<unknown>) | null = null;
  const writes: string[] = [];
  const client = createClient({
    baseUrl: svc.url,
    apiKey: key.api_key,
    apiSecret: key.api_secret,
    passphrase: key.passphrase,
    retry: noWait,
    fetch: async (input, init) => {
      if (init?.method === 'POST' || init?.method === 'DELETE') {
        if (held === null) {
          writes.push(`${init.method} → no answer`);
          held = () => fetch(input, init).then((res) => res.text());
          throw new TypeError('fetch failed');
        }
        await held(); // the first attempt lands now, before the resend
        held = null;
        const res = await fetch(input, init);
        writes.push(`${init.method} → ${res.status}`);
        return res;
      }
      return fetch(input, init);
    },
  });
  assert.deepEqual(await client.accounts.addTenant(zrn, tenant), {});
  await svc.runtime.services.tenants.applyPending(platform.platform_code, zrn);
  assert.deepEqual((await client.accounts.details(zrn)).tenants, [tenant]);
  assert.deepEqual(await client.accounts.removeTenant(zrn, tenant), {});
  // Each resend refused as a repeat of the change the first attempt made (a removal pending is one too).
  assert.deepEqual(writes, ['POST → no answer', 'POST → 409', 'DELETE → no answer', 'DELETE → 409']);
  await svc.runtime.services.tenants.applyPending(platform.platform_code, zrn);
  assert.deepEqual((await client.accounts.details(zrn)).tenants, []);
});

test('create: the same request sent again after an indeterminate answer gets 409 naming the pair and the zrn', async () => {
  const { platform, client } = await svc.newPlatform();
  const sdk = new AccountsResource(client);
  const holder = (await svc.newParticipant(platform.platform_code)).participant_code;
  const body = {
    participant_code: holder,
    account_label: 'general',
    type: 'individual' as const,
    tier: 'pro' as const,
  };
  await assert.rejects(
    sdk.create(body, { headers: { 'X-Simulator-Scenario': 'error_504_after' }, retry: noWait }),
    (error: unknown) => error instanceof SvcServerError && error.status === 504,
  );
  const requests = await svc.runtime.store.db
    .selectFrom('customer_account_requests')
    .select('zrn')
    .where('participant_code', '=', holder)
    .execute();
  assert.equal(requests.length, 1);
  // The vendor's idempotence check for POST /accounts: the pair already submitted → 409 naming it.
  await assert.rejects(sdk.create(body), (error: unknown) => {
    assert.ok(error instanceof SvcConflictError);
    assert.match(String(error.errors[0]), new RegExp(`${holder}.*general.*${requests[0]!.zrn}`));
    return true;
  });
  const after = await svc.runtime.store.db
    .selectFrom('customer_account_requests')
    .select('zrn')
    .where('participant_code', '=', holder)
    .execute();
  assert.equal(after.length, 1);
});
