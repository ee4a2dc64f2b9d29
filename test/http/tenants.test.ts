import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import { applyMovements } from '../../src/domain/balances/balances.service.ts';
import { lockParticipantFunding } from '../../src/domain/funding/funding.repository.ts';
import type { CustomerAccountDetails } from '../../src/contract/accounts.schemas.ts';
import { AccountsResource } from '../../src/sdk/resources/accounts.ts';
import { assertOtherPlatformForbidden } from '../helpers/ownership.ts';
import { accountsJobRunner } from '../helpers/accounts-jobs.ts';
import { startTestService, type PlatformFixture, type TestService } from '../helpers/test-service.ts';
import { executeLiquidity, liquidityQuote, setPrices } from '../helpers/trades-fixtures.ts';
import { assertVendorSchema } from '../helpers/vendor-schema.ts';

/**
 * Issue 5, points 2–4 and 6: tenant add and remove on the wire. The service runs without its worker
 * (SVC_ROLE=api), so that what is accepted and what is in effect can be told apart; the jobs are then run
 * by a separate graphile-worker pass (`runJobs`), as a worker process started later would.
 */
let svc: TestService;
let accountsJobs: ReturnType<typeof accountsJobRunner>;

before(async () => {
  svc = await startTestService();
  accountsJobs = accountsJobRunner(svc);
});
after(async () => {
  await accountsJobs?.close();
  await svc?.close();
});

/** A worker that starts now, runs every queued accounts job to completion, and stops. */
const runJobs = () => accountsJobs.run();

async function accountJobs(zrn: string): Promise<number> {
  const result = await sql<{ n: number }>`
    select count(*)::int as n from graphile_worker.jobs
    where task_identifier = 'accounts.apply_tenant_changes'
      and key = ${`accounts.apply_tenant_changes:${zrn}`}`.execute(svc.runtime.store.db);
  return result.rows[0]!.n;
}

async function accountNotifications(zrn: string): Promise<CustomerAccountDetails[]> {
  const rows = await svc.runtime.store.db
    .selectFrom('webhook_notifications')
    .select(['payload', 'payload_type'])
    .where('resource_key', '=', `account:${zrn}`)
    .orderBy('seq')
    .execute();
  for (const row of rows) assert.equal(row.payload_type, 'customer_account_status_changed');
  return rows.map((r) => r.payload as CustomerAccountDetails);
}

interface Fixture {
  platform: PlatformFixture;
  accounts: AccountsResource;
  holder: string;
  zrn: string;
}

async function newAccount(platform?: PlatformFixture, label = 'general'): Promise<Fixture> {
  const owner = platform ?? (await svc.newPlatform());
  const holder = (await svc.newParticipant(owner.platform.platform_code)).participant_code;
  const account = await svc.newCustomerAccount(owner.platform.platform_code, holder, label);
  return { platform: owner, accounts: new AccountsResource(owner.client), holder, zrn: account.zrn };
}

async function newMember(platform: PlatformFixture, status?: string): Promise<string> {
  return (await svc.newParticipant(platform.platform.platform_code, { status })).participant_code;
}

/**
 * The participant, named with `label`, trades with its own funds there (100 USD from creditOwn cover it): a
 * quote and its execution, each refused if the participant acted for someone else's account or was refused.
 */
async function tradeOwnFunds(
  platform: PlatformFixture,
  participantCode: string,
  label: string,
): Promise<void> {
  await setPrices(svc, { 'ETH/USD': '3000' });
  const quote = await liquidityQuote(platform.client, {
    side: 'buy',
    underlying: 'ETH',
    quoted_currency: 'USD',
    quantity: '0.01',
    participant_code: participantCode,
    account_label: label,
  });
  await executeLiquidity(platform.client, quote.quote_id);
}

/** An operator credit to the participant's own balance under `label` (a negative amount debits it). */
async function creditOwn(participantCode: string, label: string, amount = '100'): Promise<void> {
  await svc.admin.post('/balances', {
    participant_code: participantCode,
    account_label: label,
    asset: 'USD',
    amount,
  });
}

function tenantsPath(zrn: string, tenant?: string): string {
  return `/accounts/${zrn}/tenants${tenant ? `/${tenant}` : ''}`;
}

describe('add and remove a tenant', () => {
  test('202 {} now, the tenant set changes only when the job applies it, with its notification', async () => {
    const f = await newAccount();
    const tenant = await newMember(f.platform);
    const before = (await accountNotifications(f.zrn)).length;

    const res = await f.platform.client.send('POST', tenantsPath(f.zrn), {
      body: { participant_code: tenant },
    });
    assert.equal(res.status, 202);
    assert.deepEqual(res.body, {});

    // Accepted, not in effect (spec 3.2): details lists the change as pending, tenants unchanged.
    let details = await f.accounts.details(f.zrn);
    assert.deepEqual(details.tenants, []);
    assert.equal(details.pending_tenant_changes.length, 1);
    assert.equal(details.pending_tenant_changes[0]!.participant_code, tenant);
    assert.equal(details.pending_tenant_changes[0]!.change, 'add');
    assert.ok(Number.isInteger(details.pending_tenant_changes[0]!.accepted_at));
    assert.equal((await accountNotifications(f.zrn)).length, before);
    // The job was enqueued with the acceptance (same transaction: both are visible once it committed).
    assert.equal(await accountJobs(f.zrn), 1);

    await runJobs();
    details = await f.accounts.details(f.zrn);
    assert.deepEqual(details.tenants, [tenant]);
    assert.deepEqual(details.pending_tenant_changes, []);
    assertVendorSchema({ message: details }, 'CustomerAccountResponse');
    const notes = await accountNotifications(f.zrn);
    assert.equal(notes.length, before + 1);
    // wire-contract §5: the payload is the details object as it stood when the change took effect, exactly
    // (nothing added: no `timestamp`), as GET /accounts/{zrn}/details answers it.
    const got = await f.platform.client.send<{ message: CustomerAccountDetails }>(
      'GET',
      `/accounts/${f.zrn}/details`,
    );
    assert.deepEqual(notes.at(-1), got.body.message);

    const removed = await f.platform.client.send('DELETE', tenantsPath(f.zrn, tenant));
    assert.equal(removed.status, 202);
    assert.deepEqual(removed.body, {});
    details = await f.accounts.details(f.zrn);
    assert.deepEqual(details.tenants, [tenant], 'still a tenant until the removal takes effect');
    assert.deepEqual(
      details.pending_tenant_changes.map((c) => [c.participant_code, c.change]),
      [[tenant, 'remove']],
    );
    await runJobs();
    details = await f.accounts.details(f.zrn);
    assert.deepEqual(details.tenants, []);
    const { pending_tenant_changes, ...unasked } = details;
    assert.deepEqual(pending_tenant_changes, []);
    const last = (await accountNotifications(f.zrn)).at(-1)!;
    assert.deepEqual(last, unasked);
  });

  test('the SDK resource adds and removes through the same routes (zrn sent as %3A)', async () => {
    const f = await newAccount();
    const tenant = await newMember(f.platform);
    assert.deepEqual(await f.accounts.addTenant(f.zrn, tenant), {});
    await runJobs();
    assert.deepEqual((await f.accounts.details(f.zrn)).tenants, [tenant]);
    assert.deepEqual(await f.accounts.removeTenant(f.zrn, tenant), {});
    await runJobs();
    assert.deepEqual((await f.accounts.details(f.zrn)).tenants, []);
  });

  test('changes of one account take effect in the order they were accepted', async () => {
    const f = await newAccount();
    const [a, b, c] = [await newMember(f.platform), await newMember(f.platform), await newMember(f.platform)];
    // add a, add b, remove a, add c, remove c (c removed while its add is still pending).
    for (const [method, path] of [
      ['POST', a],
      ['POST', b],
      ['DELETE', a],
      ['POST', c],
      ['DELETE', c],
    ] as const) {
      const res =
        method === 'POST'
          ? await f.platform.client.send('POST', tenantsPath(f.zrn), { body: { participant_code: path } })
          : await f.platform.client.send('DELETE', tenantsPath(f.zrn, path));
      assert.equal(res.status, 202, `${method} ${path}: ${JSON.stringify(res.body)}`);
    }
    const pending = (await f.accounts.details(f.zrn)).pending_tenant_changes;
    assert.deepEqual(
      pending.map((p) => `${p.change} ${p.participant_code}`),
      [`add ${a}`, `add ${b}`, `remove ${a}`, `add ${c}`, `remove ${c}`],
    );
    const before = (await accountNotifications(f.zrn)).length;
    await runJobs();
    const notes = (await accountNotifications(f.zrn)).slice(before);
    // One notification per change, each showing the tenant set right after it.
    assert.deepEqual(
      notes.map((n) => n.tenants),
      [[a], [a, b], [b], [b, c], [b]],
    );
    // The vendor's account object, as GET /accounts/{zrn}/details gives it unasked: no pending changes in it.
    assert.ok(
      notes.every((n) => !('pending_tenant_changes' in n)),
      JSON.stringify(notes[0]),
    );
    assert.deepEqual((await f.accounts.details(f.zrn)).tenants, [b]);
  });

  test('of two concurrent adds of the same participant exactly one gets 202, the other 409', async () => {
    for (let round = 0; round < 8; round++) {
      const f = await newAccount();
      const tenant = await newMember(f.platform);
      const answers = await Promise.all(
        [0, 1].map(() =>
          f.platform.client.send('POST', tenantsPath(f.zrn), { body: { participant_code: tenant } }),
        ),
      );
      assert.deepEqual(
        answers.map((r) => r.status).sort(),
        [202, 409],
        JSON.stringify(answers.map((r) => r.body)),
      );
      const refused = answers.find((r) => r.status === 409)!;
      assert.ok(Array.isArray((refused.body as { errors: unknown }).errors));
      assert.equal((await f.accounts.details(f.zrn)).pending_tenant_changes.length, 1);
    }
  });

  test('concurrent adds of one participant to two accounts with the same label: exactly one 202', async () => {
    const platform = await svc.newPlatform();
    const first = await newAccount(platform, 'joint');
    const second = await newAccount(platform, 'joint');
    const tenant = await newMember(platform);
    const answers = await Promise.all(
      [first, second].map((f) =>
        f.platform.client.send('POST', tenantsPath(f.zrn), { body: { participant_code: tenant } }),
      ),
    );
    assert.deepEqual(answers.map((r) => r.status).sort(), [202, 409]);
  });

  test('the database refuses a second pending add of the same participant, whatever the code does', async () => {
    const f = await newAccount();
    const tenant = await newMember(f.platform);
    const insert = (id: string) =>
      svc.runtime.store.db
        .insertInto('tenant_changes')
        .values({
          change_id: id,
          zrn: f.zrn,
          platform_code: f.platform.platform.platform_code,
          participant_code: tenant,
          account_label: 'general',
          change: 'add',
          accepted_at: new Date(),
        })
        .execute();
    await insert('7d0f6a3e-08f5-4d45-9a8e-0d2f7e1b0001');
    await assert.rejects(insert('7d0f6a3e-08f5-4d45-9a8e-0d2f7e1b0002'), { code: '23505' });
    // And a participant names one account per label: a second membership under the label is refused too.
    const claim = () =>
      svc.runtime.store.db
        .insertInto('account_memberships')
        .values({
          platform_code: f.platform.platform.platform_code,
          participant_code: tenant,
          account_label: 'general',
          zrn: f.zrn,
          role: 'tenant',
          effective_at: null,
        })
        .execute();
    await claim();
    await assert.rejects(claim(), { code: '23505' });
  });
});

describe('a worker that dies loses nothing and applies each change once', () => {
  test('a change accepted while no worker runs is applied by a worker started later, once', async () => {
    const f = await newAccount();
    const tenant = await newMember(f.platform);
    assert.equal(
      (await f.platform.client.send('POST', tenantsPath(f.zrn), { body: { participant_code: tenant } }))
        .status,
      202,
    );
    const before = (await accountNotifications(f.zrn)).length;
    // No worker ran: the change and its job wait in the database.
    assert.equal(await accountJobs(f.zrn), 1);
    assert.deepEqual((await f.accounts.details(f.zrn)).tenants, []);

    await runJobs();
    await runJobs(); // a second worker finds nothing left to do
    // The job function itself run again (a retry after a crash that happened after its commit).
    assert.equal(
      await svc.runtime.services.tenants.applyPending(f.platform.platform.platform_code, f.zrn),
      0,
    );
    assert.deepEqual((await f.accounts.details(f.zrn)).tenants, [tenant]);
    assert.equal((await accountNotifications(f.zrn)).length, before + 1);
    assert.equal(await accountJobs(f.zrn), 0);
  });

  test('an application that fails midway rolls back whole; the retry applies it once', async () => {
    const f = await newAccount();
    const tenant = await newMember(f.platform);
    await f.accounts.addTenant(f.zrn, tenant);
    const before = (await accountNotifications(f.zrn)).length;
    const platformCode = f.platform.platform.platform_code;
    // The notification insert fails after the tenant set has been changed in the same transaction,
    // as a crash between the two statements would leave it.
    await sql`create function fail_account_note() returns trigger language plpgsql as $$
      begin raise exception 'simulated crash'; end $$`.execute(svc.runtime.store.db);
    await sql`create trigger fail_account_note before insert on webhook_notifications
      for each row when (new.payload_type = 'customer_account_status_changed')
      execute function fail_account_note()`.execute(svc.runtime.store.db);
    try {
      await assert.rejects(svc.runtime.services.tenants.applyPending(platformCode, f.zrn), /simulated crash/);
    } finally {
      await sql`drop trigger fail_account_note on webhook_notifications`.execute(svc.runtime.store.db);
      await sql`drop function fail_account_note()`.execute(svc.runtime.store.db);
    }
    let details = await f.accounts.details(f.zrn);
    assert.deepEqual(details.tenants, [], 'the change did not take effect without its notification');
    assert.equal(details.pending_tenant_changes.length, 1);
    assert.equal((await accountNotifications(f.zrn)).length, before);

    await runJobs();
    details = await f.accounts.details(f.zrn);
    assert.deepEqual(details.tenants, [tenant]);
    assert.equal((await accountNotifications(f.zrn)).length, before + 1);
  });

  test('two workers running the same account at once apply each change once, in order', async () => {
    const f = await newAccount();
    const members = [await newMember(f.platform), await newMember(f.platform), await newMember(f.platform)];
    for (const m of members) await f.accounts.addTenant(f.zrn, m);
    const before = (await accountNotifications(f.zrn)).length;
    const platformCode = f.platform.platform.platform_code;
    const counts = await Promise.all(
      [0, 1, 2].map(() => svc.runtime.services.tenants.applyPending(platformCode, f.zrn)),
    );
    assert.equal(
      counts.reduce((a, b) => a + b, 0),
      3,
    );
    const notes = (await accountNotifications(f.zrn)).slice(before);
    assert.deepEqual(
      notes.map((n) => n.tenants),
      [[members[0]], members.slice(0, 2), members],
    );
  });
});

describe('validation, ownership and business rules (issue 5 table, wire-contract §9 order)', () => {
  let f: Fixture;
  let other: PlatformFixture;
  let otherParticipant: string;
  before(async () => {
    f = await newAccount();
    other = await svc.newPlatform();
    otherParticipant = await newMember(other);
  });

  const add = (zrn: string, body: unknown, client = () => f.platform.client) =>
    client().send('POST', tenantsPath(zrn), { body });
  const errorsOf = (res: { body: unknown }) => (res.body as { errors: string[] }).errors;

  test('zrn not zrn:svc:<region>:account:customer:<uuid> → 400 naming zrn', async () => {
    const uuid = f.zrn.split(':').at(-1)!;
    for (const zrn of [
      'not-a-zrn',
      `zrn:zh:us:account:customer:${uuid}`,
      `zrn:svc:xx:account:customer:${uuid}`,
      `zrn:svc:us:account:customer:${uuid.toUpperCase()}`,
      `zrn:svc:us:accounts:customer:${uuid}`,
      `zrn:svc:us:account:customer:${uuid}0`,
    ]) {
      const tenant = await newMember(f.platform);
      const res = await add(encodeURIComponent(zrn), { participant_code: tenant });
      assert.equal(res.status, 400, zrn);
      assert.match(errorsOf(res).join(), /^zrn: /, zrn);
      const del = await f.platform.client.send('DELETE', tenantsPath(encodeURIComponent(zrn), 'ABCDEF'));
      assert.equal(del.status, 400, zrn);
      const details = await f.platform.client.send('GET', `/accounts/${encodeURIComponent(zrn)}/details`);
      assert.equal(details.status, 400, zrn);
    }
  });

  test('body participant_code missing, empty, over 6 chars or bad characters → 400 naming it', async () => {
    for (const body of [
      {},
      { participant_code: '' },
      { participant_code: 'ABCDEFG' },
      { participant_code: 'AB CD' },
      { participant_code: 'AB$CD' },
      { participant_code: 123456 },
      { participant_code: null },
    ]) {
      const res = await add(f.zrn, body);
      assert.equal(res.status, 400, JSON.stringify(body));
      assert.ok(
        errorsOf(res).every((e) => e.startsWith('participant_code: ')),
        `${JSON.stringify(body)} → ${JSON.stringify(res.body)}`,
      );
    }
    const extra = await add(f.zrn, { participant_code: 'ABCDEF', note: 'x' });
    assert.equal(extra.status, 400);
    assert.deepEqual(errorsOf(extra), ['note: is not allowed']);
    const notJson = await add(f.zrn, '{"participant_code":');
    assert.equal(notJson.status, 400);
  });

  test('path tenant not exactly 6 chars → 400 naming tenant', async () => {
    for (const tenant of ['ABCDE', 'ABCDEFG', 'AB%20DEF', 'A']) {
      const res = await f.platform.client.send('DELETE', tenantsPath(f.zrn, tenant));
      assert.equal(res.status, 400, tenant);
      assert.match(errorsOf(res).join(), /^tenant: /, tenant);
    }
  });

  test('account unknown → 404; account of another platform → 403 (before any body rule)', async () => {
    const unknown = 'zrn:svc:us:account:customer:00000000-0000-4000-8000-000000000000';
    const tenant = await newMember(f.platform);
    const res = await add(unknown, { participant_code: tenant });
    assert.equal(res.status, 404);
    assert.deepEqual(res.body, { error: 'Not Found' });
    assert.equal((await f.platform.client.send('DELETE', tenantsPath(unknown, tenant))).status, 404);
    assert.equal((await f.platform.client.send('GET', `/accounts/${unknown}/details`)).status, 404);

    // wire-contract §9: ownership before the business rules: another platform naming an unknown
    // participant still gets 403, not 400.
    const foreign = await add(f.zrn, { participant_code: 'ZZZZZZ' }, () => other.client);
    assert.equal(foreign.status, 403);
    assert.equal((foreign.body as { error: unknown }).error, true);
  });

  test('participant unknown, of another platform, or not onboarded → 400 naming participant_code', async () => {
    const pending = await newMember(f.platform, 'submitted');
    const locked = await newMember(f.platform, 'locked');
    for (const code of ['ZZZZZZ', otherParticipant, pending, locked, f.platform.platform.platform_code]) {
      const res = await add(f.zrn, { participant_code: code });
      assert.equal(res.status, 400, code);
      assert.match(errorsOf(res)[0]!, new RegExp(`^participant_code: participant ${code} `));
    }
    assert.deepEqual((await f.accounts.details(f.zrn)).pending_tenant_changes, []);
  });

  test('participant is the primary holder → 400 (add and remove)', async () => {
    const res = await add(f.zrn, { participant_code: f.holder });
    assert.equal(res.status, 400);
    assert.match(errorsOf(res)[0]!, /^participant_code: .*primary account holder/);
    const del = await f.platform.client.send('DELETE', tenantsPath(f.zrn, f.holder));
    assert.equal(del.status, 400);
    assert.match(errorsOf(del)[0]!, /^tenant: .*primary account holder/);
  });

  test('remove takes no body but `{}`: a field, or a body that is no object, is a 400 naming it, and removes nothing', async () => {
    const g = await newAccount();
    const tenant = await newMember(g.platform);
    assert.equal((await add(g.zrn, { participant_code: tenant }, () => g.platform.client)).status, 202);
    await runJobs();
    for (const [body, line] of [
      [{ anything: 'goes' }, 'anything: is not allowed'],
      ['[1,2]', 'body: must be object'],
      ['"x"', 'body: must be object'],
    ] as const) {
      const res = await g.platform.client.send('DELETE', tenantsPath(g.zrn, tenant), { body });
      assert.equal(res.status, 400, JSON.stringify(res.body));
      assert.deepEqual(errorsOf(res), [line]);
    }
    // Nothing was accepted: a removal is not pending, so the tenant is still one to remove (a second would be 409).
    const removed = await g.platform.client.send('DELETE', tenantsPath(g.zrn, tenant), { body: {} });
    assert.equal(removed.status, 202, JSON.stringify(removed.body));
    await runJobs();
  });

  test('already a tenant, or an add already pending → 409', async () => {
    const g = await newAccount();
    const tenant = await newMember(g.platform);
    assert.equal((await add(g.zrn, { participant_code: tenant }, () => g.platform.client)).status, 202);
    const pendingAgain = await add(g.zrn, { participant_code: tenant }, () => g.platform.client);
    assert.equal(pendingAgain.status, 409);
    assert.match(errorsOf(pendingAgain)[0]!, /already pending/);
    await runJobs();
    const tenantAgain = await add(g.zrn, { participant_code: tenant }, () => g.platform.client);
    assert.equal(tenantAgain.status, 409);
    assert.match(errorsOf(tenantAgain)[0]!, /already a tenant/);
    // A removal already pending → 409 for a second removal.
    assert.equal((await g.platform.client.send('DELETE', tenantsPath(g.zrn, tenant))).status, 202);
    const removeAgain = await g.platform.client.send('DELETE', tenantsPath(g.zrn, tenant));
    assert.equal(removeAgain.status, 409);
    await runJobs();
  });

  test('remove a participant that is not a tenant (and has no pending add) → 404; another platform’s → 403', async () => {
    const g = await newAccount();
    const stranger = await newMember(g.platform);
    for (const code of [stranger, 'ZZZZZZ']) {
      const res = await g.platform.client.send('DELETE', tenantsPath(g.zrn, code));
      assert.equal(res.status, 404, code);
      assert.deepEqual(res.body, { error: 'Not Found' });
    }
    // wire-contract §9: a participant named in the path that belongs to another platform → 403.
    const foreign = await g.platform.client.send('DELETE', tenantsPath(g.zrn, otherParticipant));
    assert.equal(foreign.status, 403);
    assert.equal((foreign.body as { error: unknown }).error, true);
    // With an add pending, the removal is accepted and follows the add.
    await g.accounts.addTenant(g.zrn, stranger);
    assert.equal((await g.platform.client.send('DELETE', tenantsPath(g.zrn, stranger))).status, 202);
    await runJobs();
    // Once removed, removing again is 404.
    assert.equal((await g.platform.client.send('DELETE', tenantsPath(g.zrn, stranger))).status, 404);
  });

  test('a participant acts for one account per label: a second account with that label → 409', async () => {
    const platform = await svc.newPlatform();
    const first = await newAccount(platform, 'joint');
    const second = await newAccount(platform, 'joint');
    const tenant = await newMember(platform);
    await first.accounts.addTenant(first.zrn, tenant);
    const res = await second.platform.client.send('POST', tenantsPath(second.zrn), {
      body: { participant_code: tenant },
    });
    assert.equal(res.status, 409);
    assert.match(errorsOf(res)[0]!, new RegExp(`tenant of account ${first.zrn} \\(pending\\)`));
    // A participant that holds its own account with that label cannot be a tenant under it either.
    const holderOfJoint = second.holder;
    const third = await newAccount(platform, 'joint');
    const own = await third.platform.client.send('POST', tenantsPath(third.zrn), {
      body: { participant_code: holderOfJoint },
    });
    assert.equal(own.status, 409);
    assert.match(errorsOf(own)[0]!, /holds account/);
    // Under another label it can.
    const other = await newAccount(platform, 'family');
    assert.equal(
      (
        await other.platform.client.send('POST', tenantsPath(other.zrn), {
          body: { participant_code: tenant },
        })
      ).status,
      202,
    );
    await runJobs();
  });

  test('a participant with balances of its own under the label cannot become a tenant there → 409 (they would be out of reach)', async () => {
    const platform = await svc.newPlatform();
    const target = await newAccount(platform, 'general');
    const funded = await newMember(platform);
    const credit = (amount: string) => creditOwn(funded, 'general', amount);
    await credit('100');
    const add = await target.platform.client.send('POST', tenantsPath(target.zrn), {
      body: { participant_code: funded },
    });
    assert.equal(add.status, 409);
    assert.match(
      errorsOf(add)[0]!,
      new RegExp(
        `^participant_code: participant ${funded} holds balances of its own under account_label general`,
      ),
    );
    // Nor as one of the tenants a new account is created with.
    const holder = await newMember(platform);
    const created = await platform.client.send('POST', '/accounts', {
      body: {
        participant_code: holder,
        account_label: 'general',
        type: 'jtic',
        tier: 'pro',
        tenants: [funded],
      },
    });
    assert.equal(created.status, 409, JSON.stringify(created.body));
    assert.match(errorsOf(created)[0]!, new RegExp(`^tenants: participant ${funded} holds balances`));
    // Once they are gone (moved out, here debited), it can.
    await credit('-100');
    const again = await target.platform.client.send('POST', tenantsPath(target.zrn), {
      body: { participant_code: funded },
    });
    assert.equal(again.status, 202, JSON.stringify(again.body));
    await runJobs();
  });

  test('an add that is pending while its participant comes to hold balances of its own under the label is refused when applied, and so is a removal after it', async () => {
    const platform = await svc.newPlatform();
    const target = await newAccount(platform, 'general');
    const member = await newMember(platform);
    const client = target.platform.client;
    const added = await client.send('POST', tenantsPath(target.zrn), { body: { participant_code: member } });
    assert.equal(added.status, 202, JSON.stringify(added.body));
    const removed = await client.send('DELETE', tenantsPath(target.zrn, member));
    assert.equal(removed.status, 202, JSON.stringify(removed.body));
    // Until the add takes effect, the participant named with the label acts for itself: this lands on its own.
    await creditOwn(member, 'general');
    const notesBefore = (await accountNotifications(target.zrn)).length;

    await runJobs();
    const details = await target.accounts.details(target.zrn);
    assert.deepEqual(details.tenants, [], 'the add did not take effect');
    assert.deepEqual(details.pending_tenant_changes, [], 'both changes are settled');
    // Each settled change is told as an applied one would be (spec 4.2: confirm by the account webhook).
    const notes = await accountNotifications(target.zrn);
    assert.equal(notes.length, notesBefore + 2);
    assert.deepEqual(notes.at(-1)!.tenants, []);
    const settled = await svc.runtime.store.db
      .selectFrom('tenant_changes')
      .select(['change', 'applied_at', 'refused_reason'])
      .where('zrn', '=', target.zrn)
      .orderBy('seq')
      .execute();
    assert.deepEqual(
      settled.map((c) => [c.change, c.applied_at !== null]),
      [
        ['add', true],
        ['remove', true],
      ],
    );
    assert.match(
      settled[0]!.refused_reason!,
      new RegExp(`participant ${member} came to hold balances of its own`),
    );
    assert.match(settled[1]!.refused_reason!, /its addition was refused/);
    // Not a former tenant: its own funds under the label stay in reach (a tenancy would have hidden them,
    // and the removal after it would have made the participant's requests 403).
    await tradeOwnFunds(platform, member, 'general');
  });

  test('an add while the participant’s removal is pending → 409 that says to add it again once the removal is in effect', async () => {
    // It said "already a tenant" (or "already pending") of a tenancy the queue was about to end.
    const platform = await svc.newPlatform();
    const target = await newAccount(platform, 'general');
    const member = await newMember(platform);
    const client = target.platform.client;
    const add = () => client.send('POST', tenantsPath(target.zrn), { body: { participant_code: member } });
    assert.equal((await add()).status, 202);
    assert.equal((await client.send('DELETE', tenantsPath(target.zrn, member))).status, 202);
    const pending = await add();
    assert.equal(pending.status, 409);
    assert.equal(
      errorsOf(pending)[0],
      `adding participant ${member} to account ${target.zrn} is already pending, and its removal is pending: add it again once the removal has taken effect`,
    );
    await runJobs();
    assert.equal((await add()).status, 202);
    await runJobs();
    assert.equal((await client.send('DELETE', tenantsPath(target.zrn, member))).status, 202);
    const inEffect = await add();
    assert.equal(inEffect.status, 409);
    assert.match(
      errorsOf(inEffect)[0]!,
      /is already a tenant of account .*, and its removal is pending: add it again/,
    );
    await runJobs();
    assert.deepEqual((await target.accounts.details(target.zrn)).tenants, []);
  });

  test('a removal queued after a refused add is refused even when a new add of the participant is pending behind it', async () => {
    // The job settles one change per transaction. Between the add's refusal and the removal's turn (a crash
    // in between, or only the time between two transactions) the platform may add the participant again;
    // the removal took that pending tenancy for one to end, deleted it, and the new add was then marked
    // applied with no tenancy: announced, never in effect, and the participant refused (403) as a former
    // tenant.
    const platform = await svc.newPlatform();
    const target = await newAccount(platform, 'general');
    const member = await newMember(platform);
    const client = target.platform.client;
    assert.equal(
      (await client.send('POST', tenantsPath(target.zrn), { body: { participant_code: member } })).status,
      202,
    );
    assert.equal((await client.send('DELETE', tenantsPath(target.zrn, member))).status, 202);
    await creditOwn(member, 'general');
    // The add's refusal commits; the removal's transaction fails (the worker dies there).
    await svc.runtime.store.pool.query(`
      create function test_fail_removal() returns trigger language plpgsql as $$
      begin
        if new.change = 'remove' and new.zrn = '${target.zrn}' then raise exception 'worker died'; end if;
        return new;
      end $$;
      create trigger test_fail_removal before update on tenant_changes
        for each row execute function test_fail_removal();`);
    try {
      await runJobs();
    } finally {
      await svc.runtime.store.pool.query(`drop trigger test_fail_removal on tenant_changes;
        drop function test_fail_removal();`);
    }
    assert.deepEqual(
      (await target.accounts.details(target.zrn)).pending_tenant_changes.map((c) => c.change),
      ['remove'],
      'the add is settled (refused), the removal is not',
    );
    // Its own funds moved out, the participant is added again: accepted behind the removal.
    await creditOwn(member, 'general', '-100');
    assert.equal(
      (await client.send('POST', tenantsPath(target.zrn), { body: { participant_code: member } })).status,
      202,
    );

    await runJobs();
    const details = await target.accounts.details(target.zrn);
    assert.deepEqual(details.tenants, [member], 'the new add took effect');
    assert.deepEqual(details.pending_tenant_changes, []);
    const settled = await svc.runtime.store.db
      .selectFrom('tenant_changes')
      .select(['change', 'refused_reason'])
      .where('zrn', '=', target.zrn)
      .orderBy('seq')
      .execute();
    assert.deepEqual(
      settled.map((c) => [c.change, c.refused_reason === null]),
      [
        ['add', false],
        ['remove', false],
        ['add', true],
      ],
    );
    assert.deepEqual((await accountNotifications(target.zrn)).at(-1)!.tenants, [member]);
  });

  test('a tenant an account is created with is left out if it came to hold balances of its own under the label meanwhile', async () => {
    const platform = await svc.newPlatform();
    const holder = await newMember(platform);
    const [kept, funded] = [await newMember(platform), await newMember(platform)];
    const created = await platform.client.send('POST', '/accounts', {
      body: {
        participant_code: holder,
        account_label: 'shared',
        type: 'jtic',
        tier: 'pro',
        tenants: [kept, funded],
      },
    });
    assert.equal(created.status, 202, JSON.stringify(created.body));
    await creditOwn(funded, 'shared');

    await runJobs();
    const accounts = new AccountsResource(platform.client);
    const listed = await svc.runtime.store.db
      .selectFrom('customer_accounts')
      .select('zrn')
      .where('participant_code', '=', holder)
      .executeTakeFirstOrThrow();
    assert.deepEqual((await accounts.details(listed.zrn)).tenants, [kept]);
    const refused = await svc.runtime.store.db
      .selectFrom('tenant_changes')
      .select(['participant_code', 'change', 'refused_reason'])
      .where('zrn', '=', listed.zrn)
      .execute();
    assert.equal(refused.length, 1);
    assert.equal(refused[0]!.participant_code, funded);
    assert.match(
      refused[0]!.refused_reason!,
      new RegExp(`participant ${funded} came to hold balances of its own`),
    );
    // Its own funds stay in reach; the other tenant acts for the account.
    await tradeOwnFunds(platform, funded, 'shared');
  });

  test('a deposit in flight while a pending add is applied is waited for: the add is refused, not applied over it', async () => {
    const f = await newAccount();
    const member = await newMember(f.platform);
    const platformCode = f.platform.platform.platform_code;
    await f.accounts.addTenant(f.zrn, member);
    const db = svc.runtime.store.db;
    // What recordDeposit does for a participant that acts for itself: the funding lock first, then the credit;
    // its transaction is held open until released.
    let release!: () => void;
    const released = new Promise<void>((resolve) => (release = resolve));
    let credited!: () => void;
    const creditMade = new Promise<void>((resolve) => (credited = resolve));
    const deposit = db.transaction().execute(async (trx) => {
      await lockParticipantFunding(trx, member);
      await applyMovements(trx, { runId: randomUUID(), runType: 'deposit', timestamp: Date.now() }, [
        {
          platformCode,
          participantCode: member,
          accountLabel: 'general',
          asset: 'USD',
          change: '100',
          movementType: 'deposit',
        },
      ]);
      credited();
      await released;
    });
    await creditMade;
    const applying = svc.runtime.services.tenants.applyPending(platformCode, f.zrn);
    // The job either finishes (it did not wait for the deposit) or is seen waiting for the funding lock.
    // In this file's database only: other test files' advisory locks are on the same server. Ends when the job
    // does (it did not wait), or after 15 s.
    let applied = false;
    const waiting = async () => {
      const deadline = Date.now() + 15_000;
      while (!applied && Date.now() < deadline) {
        const { rows } = await sql<{ n: number }>`
          select count(*)::int as n from pg_locks
          where locktype = 'advisory' and not granted
            and database = (select oid from pg_database where datname = current_database())`.execute(db);
        if (rows[0]!.n > 0) return;
        await new Promise((resolve) => setTimeout(resolve, 10));
      }
    };
    await Promise.race([applying.finally(() => (applied = true)), waiting()]);
    release();
    await Promise.all([deposit, applying]);
    assert.deepEqual((await f.accounts.details(f.zrn)).tenants, [], 'the add was refused');
    const own = await db
      .selectFrom('balance_accounts')
      .select('balance')
      .where('participant_code', '=', member)
      .where('account_label', '=', 'general')
      .executeTakeFirstOrThrow();
    assert.equal(Number(own.balance), 100);
  });

  test('every route that names an account refuses another platform with 403 (spec 5.4)', async () => {
    const g = await newAccount();
    const tenant = await newMember(g.platform);
    await g.accounts.addTenant(g.zrn, tenant);
    await runJobs();
    const clients = { owner: g.platform.client, other: other.client };
    await assertOtherPlatformForbidden({ method: 'GET', path: `/accounts/${g.zrn}/details` }, clients);
    await assertOtherPlatformForbidden(
      { method: 'GET', path: `/accounts/${encodeURIComponent(g.zrn)}/details` },
      clients,
    );
    // State-changing routes: the owner's own call is checked by the tests above, not repeated here.
    await assertOtherPlatformForbidden(
      { method: 'POST', path: tenantsPath(g.zrn), options: { body: { participant_code: otherParticipant } } },
      clients,
      false,
    );
    await assertOtherPlatformForbidden(
      { method: 'DELETE', path: tenantsPath(g.zrn, tenant) },
      clients,
      false,
    );
    // Nothing changed for the owner.
    const details = await g.accounts.details(g.zrn);
    assert.deepEqual(details.tenants, [tenant]);
    assert.deepEqual(details.pending_tenant_changes, []);
  });
});
