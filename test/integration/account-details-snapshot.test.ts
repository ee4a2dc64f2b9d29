import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';
import { startTestService, type TestService } from '../helpers/test-service.ts';

/**
 * Spec 4.2: a platform confirms a tenant change by reading the account's details, and the SDK's idempotence
 * check after a 502/504 reads the same fields. The tenants and the pending changes must come from one
 * snapshot: read on either side of the commit that applies a change, an accepted add would be in neither list
 * (read as refused) and an accepted removal in the tenants with nothing pending (read as refused too). The
 * window is a commit landing between two reads, so the job and the readers race for many rounds: each read
 * must show every change either pending or done.
 */
let svc: TestService;
before(async () => {
  svc = await startTestService();
});
after(() => svc?.close());

test('account details show a tenant change pending or applied, never neither, while the job applies it', async () => {
  const { platform } = await svc.newPlatform();
  const code = platform.platform_code;
  const holder = (await svc.newParticipant(code)).participant_code;
  const { zrn } = await svc.newCustomerAccount(code, holder);
  const tenant = (await svc.newParticipant(code)).participant_code;
  const { tenants, customerAccounts } = svc.runtime.services;

  const impossible: string[] = [];
  let reads = 0;
  for (let round = 0; round < 80; round++) {
    const adding = round % 2 === 0;
    if (adding) await tenants.add(code, zrn, tenant);
    else await tenants.remove(code, zrn, tenant);
    let applied = false;
    const apply = tenants.applyPending(code, zrn).then(() => (applied = true));
    const reader = async () => {
      do {
        const details = await customerAccounts.details(code, zrn, { withPending: true });
        reads++;
        const listed = details.tenants.includes(tenant);
        const pending = details.pending_tenant_changes!.some((c) => c.participant_code === tenant);
        // An add is done when listed, a removal when not; either way, or still pending.
        if (!pending && listed !== adding)
          impossible.push(`${adding ? 'add' : 'remove'}: ${JSON.stringify(details)}`);
      } while (!applied);
    };
    await Promise.all([apply, reader(), reader(), reader()]);
  }
  assert.ok(reads >= 240);
  assert.deepEqual(impossible, [], `${impossible.length} of ${reads} reads`);
});
