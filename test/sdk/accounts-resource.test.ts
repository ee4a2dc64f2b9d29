import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
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
