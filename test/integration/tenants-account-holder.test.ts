import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type { ListAccountsResponse } from '../../src/contract/accounts.schemas.ts';
import {
  resolveAccountHolder,
  resolveDepositHolder,
  type AccountHolder,
} from '../../src/domain/accounts/account-holder.ts';
import { DomainError } from '../../src/domain/errors.ts';
import { AccountsResource } from '../../src/sdk/resources/accounts.ts';
import { startTestService, type PlatformFixture, type TestService } from '../helpers/test-service.ts';

/**
 * Issue 5, point 5: a tenant acts as the primary holder. `resolveAccountHolder` is the one place that
 * decides it (funding and trades call it); shown here directly and on the accounts routes.
 */
let svc: TestService;
before(async () => {
  svc = await startTestService();
});
after(() => svc?.close());

interface World {
  platform: PlatformFixture;
  code: string;
  sdk: AccountsResource;
  holder: string;
  tenant: string;
  zrn: string;
}

async function member(platform: PlatformFixture, status?: string): Promise<string> {
  return (await svc.newParticipant(platform.platform.platform_code, { status })).participant_code;
}

/** Holder H with account "joint", tenant T in effect. */
async function world(label = 'joint'): Promise<World> {
  const platform = await svc.newPlatform();
  const code = platform.platform.platform_code;
  const holder = await member(platform);
  const tenant = await member(platform);
  const { zrn } = await svc.newCustomerAccount(code, holder, label);
  const sdk = new AccountsResource(platform.client);
  await sdk.addTenant(zrn, tenant);
  await apply(code, zrn);
  return { platform, code, sdk, holder, tenant, zrn };
}

/** Runs the tenant-change job's work for an account (what the worker does). */
function apply(platformCode: string, zrn: string) {
  return svc.runtime.services.tenants.applyPending(platformCode, zrn);
}

/**
 * X: the account "joint" of a new participant, created naming the world's tenant among its tenants through the public
 * API, its creation applied as the worker does.
 */
async function accountNamingTenant(w: World): Promise<{ creator: string; zrn: string }> {
  const creator = await member(w.platform);
  const accepted = await w.platform.client.send('POST', '/accounts', {
    body: {
      participant_code: creator,
      account_label: 'joint',
      type: 'jtwros',
      tier: 'pro',
      tenants: [w.tenant],
    },
  });
  assert.equal(accepted.status, 202, JSON.stringify(accepted.body));
  const request = await svc.runtime.store.db
    .selectFrom('customer_account_requests')
    .select(['request_id', 'zrn'])
    .where('participant_code', '=', creator)
    .executeTakeFirstOrThrow();
  await svc.runtime.services.customerAccounts.applyCreation(w.code, request.request_id);
  return { creator, zrn: request.zrn };
}

/** Sets when the creation of the account `zrn` took effect, as the clock of the instance that applied it said. */
function createdAt(zrn: string, at: Date) {
  return svc.runtime.store.db
    .updateTable('customer_account_requests')
    .set({ applied_at: at })
    .where('zrn', '=', zrn)
    .execute();
}

/**
 * Sets when `participant`'s changes of the account `zrn` took effect: all of them, those of one kind (`change`), or
 * the last accepted of those (`last`).
 */
function changedAt(
  zrn: string,
  participant: string,
  at: Date,
  only: { change?: 'add' | 'remove'; last?: true } = {},
) {
  const { db } = svc.runtime.store;
  const mine = db
    .selectFrom('tenant_changes')
    .where('zrn', '=', zrn)
    .where('participant_code', '=', participant)
    .$if(only.change !== undefined, (q) => q.where('change', '=', only.change!));
  return db
    .updateTable('tenant_changes')
    .set({ applied_at: at })
    .where('seq', 'in', only.last ? mine.select((e) => e.fn.max('seq').as('seq')) : mine.select('seq'))
    .execute();
}

function resolve(platformCode: string, participant: string, label: string): Promise<AccountHolder> {
  return resolveAccountHolder(svc.runtime.store.db, platformCode, participant, label);
}

async function refusal(promise: Promise<unknown>): Promise<DomainError> {
  const error = await promise.then(
    () => assert.fail('expected a refusal'),
    (e: unknown) => e,
  );
  assert.ok(error instanceof DomainError, String(error));
  return error;
}

describe('resolveAccountHolder', () => {
  test('the holder acts for its own account', async () => {
    const w = await world();
    assert.deepEqual(await resolve(w.code, w.holder, 'joint'), {
      actingParticipantCode: w.holder,
      ownerParticipantCode: w.holder,
      accountLabel: 'joint',
      zrn: w.zrn,
      role: 'holder',
    });
  });

  test("a tenant naming itself with the account's label acts for the holder's account", async () => {
    const w = await world();
    assert.deepEqual(await resolve(w.code, w.tenant, 'joint'), {
      actingParticipantCode: w.tenant,
      ownerParticipantCode: w.holder,
      accountLabel: 'joint',
      zrn: w.zrn,
      role: 'tenant',
    });
    // Under another label the tenant is only itself.
    const own = await resolve(w.code, w.tenant, 'general');
    assert.equal(own.ownerParticipantCode, w.tenant);
    assert.equal(own.zrn, null);
    assert.equal(own.role, 'self');
  });

  test('a pending add does not act yet; a pending removal still does; an applied removal is refused with 403', async () => {
    const w = await world();
    const newcomer = await member(w.platform);
    await w.sdk.addTenant(w.zrn, newcomer);
    assert.equal(
      (await resolve(w.code, newcomer, 'joint')).ownerParticipantCode,
      newcomer,
      'not in effect yet',
    );
    await apply(w.code, w.zrn);
    assert.equal((await resolve(w.code, newcomer, 'joint')).ownerParticipantCode, w.holder);

    await w.sdk.removeTenant(w.zrn, newcomer);
    assert.equal(
      (await resolve(w.code, newcomer, 'joint')).ownerParticipantCode,
      w.holder,
      'a removal takes effect only when applied',
    );
    await apply(w.code, w.zrn);
    const error = await refusal(resolve(w.code, newcomer, 'joint'));
    assert.equal(error.code, 'forbidden');
    assert.match(error.message, new RegExp(`no longer a tenant of account ${w.zrn}`));
    // The other tenant is unaffected.
    assert.equal((await resolve(w.code, w.tenant, 'joint')).ownerParticipantCode, w.holder);
  });

  test('a former tenant re-added, or given an account of its own under the label, acts again', async () => {
    const w = await world();
    await w.sdk.removeTenant(w.zrn, w.tenant);
    await apply(w.code, w.zrn);
    await refusal(resolve(w.code, w.tenant, 'joint'));
    await w.sdk.addTenant(w.zrn, w.tenant);
    await apply(w.code, w.zrn);
    assert.equal((await resolve(w.code, w.tenant, 'joint')).ownerParticipantCode, w.holder);

    await w.sdk.removeTenant(w.zrn, w.tenant);
    await apply(w.code, w.zrn);
    const own = await svc.newCustomerAccount(w.code, w.tenant, 'joint');
    const holder = await resolve(w.code, w.tenant, 'joint');
    assert.equal(holder.ownerParticipantCode, w.tenant);
    assert.equal(holder.zrn, own.zrn);
    assert.equal(holder.role, 'holder');
  });

  test('a tenant of two accounts with the same label cannot happen: the second tenancy is refused', async () => {
    const w = await world();
    const otherHolder = await member(w.platform);
    const second = await svc.newCustomerAccount(w.code, otherHolder, 'joint');
    const res = await w.platform.client.send('POST', `/accounts/${second.zrn}/tenants`, {
      body: { participant_code: w.tenant },
    });
    assert.equal(res.status, 409);
    // So the pair (tenant, "joint") still names exactly the first account.
    assert.equal((await resolve(w.code, w.tenant, 'joint')).zrn, w.zrn);
    // Nor can the tenant open an account of its own with that label while the tenancy stands.
    await assert.rejects(svc.newCustomerAccount(w.code, w.tenant, 'joint'), { status: 409 });
    const viaApi = await w.platform.client.send('POST', '/accounts', {
      body: { participant_code: w.tenant, account_label: 'joint', type: 'individual', tier: 'pro' },
    });
    assert.equal(viaApi.status, 409);
  });

  test('unknown, foreign and not approved participants are refused with 400 naming the field', async () => {
    const w = await world();
    const other = await svc.newPlatform();
    const foreign = await member(other);
    const locked = await member(w.platform, 'locked');
    for (const code of ['ZZZZZZ', foreign, locked]) {
      const error = await refusal(
        resolveAccountHolder(svc.runtime.store.db, w.code, code, 'joint', 'tenant_code'),
      );
      assert.equal(error.code, 'invalid');
      assert.match(error.messages[0]!, new RegExp(`^tenant_code: participant ${code} `));
    }
    // A tenant that is no longer approved does not act either.
    await svc.admin.patch(`/participants/${w.tenant}`, { status: 'locked' });
    assert.equal((await refusal(resolve(w.code, w.tenant, 'joint'))).code, 'invalid');
  });
});

describe('tenants act as the primary holder on the accounts routes', () => {
  test('details read as a participant: holder and tenant served alike, former tenant and stranger 403', async () => {
    const w = await world();
    const stranger = await member(w.platform);
    const asHolder = await w.sdk.details(w.zrn, { participantCode: w.holder });
    const asTenant = await w.sdk.details(w.zrn, { participantCode: w.tenant });
    assert.deepEqual(asTenant, asHolder);
    assert.deepEqual(asTenant.tenants, [w.tenant]);

    const strangerRes = await w.platform.client.send('GET', `/accounts/${w.zrn}/details`, {
      query: { participant_code: stranger },
    });
    assert.equal(strangerRes.status, 403);
    const unknown = await w.platform.client.send('GET', `/accounts/${w.zrn}/details`, {
      query: { participant_code: 'ZZZZZZ' },
    });
    assert.equal(unknown.status, 400);
    assert.match((unknown.body as { errors: string[] }).errors[0]!, /^participant_code: /);

    await w.sdk.removeTenant(w.zrn, w.tenant);
    // Until the removal has taken effect the tenant is still served.
    assert.equal(
      (
        await w.platform.client.send('GET', `/accounts/${w.zrn}/details`, {
          query: { participant_code: w.tenant },
        })
      ).status,
      200,
    );
    await apply(w.code, w.zrn);
    const former = await w.platform.client.send('GET', `/accounts/${w.zrn}/details`, {
      query: { participant_code: w.tenant },
    });
    assert.equal(former.status, 403);
    assert.equal((former.body as { error: unknown }).error, true);
    assert.match((former.body as { message: string }).message, /no longer a tenant/);
    // Without a participant the platform still reads its account.
    assert.equal((await w.platform.client.send('GET', `/accounts/${w.zrn}/details`)).status, 200);
  });

  test("GET /accounts naming a tenant with the account's label lists the holder's balances there", async () => {
    const w = await world();
    await svc.admin.post('/balances', {
      participant_code: w.holder,
      account_label: 'joint',
      asset: 'USD',
      amount: '50',
    });
    await svc.admin.post('/balances', {
      participant_code: w.tenant,
      account_label: 'general',
      asset: 'USD',
      amount: '3',
    });
    const list = (query: Record<string, string>) =>
      w.platform.client.send<ListAccountsResponse>('GET', '/accounts', { query });
    const asTenant = await list({ account_owner: w.tenant, account_label: 'joint' });
    assert.equal(asTenant.status, 200);
    assert.deepEqual(
      asTenant.body.message.map((m) => [m.account_owner, m.account_label, m.balance]),
      [[w.holder, 'joint', '50']],
    );
    // account_owner alone is a literal filter: the tenant's own balances.
    const own = await list({ account_owner: w.tenant });
    assert.deepEqual(
      own.body.message.map((m) => [m.account_owner, m.account_label]),
      [[w.tenant, 'general']],
    );

    await w.sdk.removeTenant(w.zrn, w.tenant);
    await apply(w.code, w.zrn);
    const former = await list({ account_owner: w.tenant, account_label: 'joint' });
    assert.equal(former.status, 403);
  });
});

describe('whose account a deposit made at a time funds (resolveDepositHolder)', () => {
  test('by the tenancy then, whether a tenant change or an account’s creation made it', async () => {
    // Probe: a creation's tenants have no tenant change of their own, and a deposit one of them made before its
    // removal was refused as "no longer a tenant". Here the participant was first a tenant of Y (added, then
    // removed: changes), then named at the creation of X under the same label, then removed from X.
    const w = await world('joint'); // Y: holder w.holder, tenant w.tenant added by a change
    const whileOfY = new Date();
    await w.sdk.removeTenant(w.zrn, w.tenant);
    await apply(w.code, w.zrn);
    const between = new Date();
    const { creator, ...request } = await accountNamingTenant(w);
    const whileOfX = new Date();
    await w.sdk.removeTenant(request.zrn, w.tenant);
    await apply(w.code, request.zrn);

    const fundedAt = async (at: Date) => {
      const holder = await resolveDepositHolder(svc.runtime.store.db, w.code, w.tenant, 'joint', at);
      return [holder.zrn, holder.ownerParticipantCode];
    };
    assert.deepEqual(await fundedAt(whileOfY), [w.zrn, w.holder]);
    assert.deepEqual(await fundedAt(whileOfX), [request.zrn, creator]);
    // Between the two tenancies, and after the last, it acted for neither.
    for (const at of [between, new Date()]) {
      const error = await refusal(resolveDepositHolder(svc.runtime.store.db, w.code, w.tenant, 'joint', at));
      assert.match(error.message, /no longer a tenant/);
    }
  });
});

test('in one millisecond: an add to another account that follows a creation’s tenancy wins; a change of the account itself always does', async () => {
  // Review: on a tie of times the creation was taken as the later, also over an add to another account, which can
  // follow only the creation's tenancy's end: every deposit of the participant then credited the account it had left.
  // The times are set alike here, as three changes applied in one millisecond (or by instances whose clocks differ).
  const w = await world('joint'); // Y, with w.tenant in effect; removed below, to be named at X's creation
  await w.sdk.removeTenant(w.zrn, w.tenant);
  await apply(w.code, w.zrn);
  const x = await accountNamingTenant(w);
  const { db } = svc.runtime.store;
  await w.sdk.removeTenant(x.zrn, w.tenant);
  await apply(w.code, x.zrn);
  await w.sdk.addTenant(w.zrn, w.tenant);
  await apply(w.code, w.zrn);

  const instant = new Date(Date.now() - 60_000);
  await createdAt(x.zrn, instant);
  // Y's first tenancy, before all that.
  await changedAt(w.zrn, w.tenant, new Date(instant.getTime() - 2_000));
  await changedAt(x.zrn, w.tenant, instant, { change: 'remove', last: true });
  await changedAt(w.zrn, w.tenant, instant, { change: 'add', last: true });
  const now = await resolveDepositHolder(db, w.code, w.tenant, 'joint', new Date());
  assert.deepEqual([now.zrn, now.ownerParticipantCode], [w.zrn, w.holder], 'Y, its tenancy now');

  // X's removal put before X's creation (the clock of the instance that applied it behind), and Y's add out of the
  // way: at a time just after X's creation the removal still counts as after it, so X is not the answer; with no
  // tenancy found then, the deposit goes by the participant's tenancy now (Y).
  await changedAt(x.zrn, w.tenant, new Date(instant.getTime() - 1_000));
  await changedAt(w.zrn, w.tenant, new Date(), { change: 'add', last: true });
  const justAfter = await resolveDepositHolder(
    db,
    w.code,
    w.tenant,
    'joint',
    new Date(instant.getTime() + 1),
  );
  assert.deepEqual([justAfter.zrn, justAfter.ownerParticipantCode], [w.zrn, w.holder]);
});

test('instances whose clocks differ: the order the changes were accepted in decides, not their times', async () => {
  // Review: with the times of the changes compared, an instance 50 ms behind made every later deposit credit an
  // account the participant had left (a), or refused one made during a creation's tenancy (b).
  const { db } = svc.runtime.store;
  /** Y with the tenant added and removed; X created naming it; the times are set afterwards. */
  const story = async () => {
    const w = await world('joint');
    await w.sdk.removeTenant(w.zrn, w.tenant);
    await apply(w.code, w.zrn);
    const { creator, ...x } = await accountNamingTenant(w);
    return { w, x, creator };
  };
  const t0 = Date.now() - 60_000;

  // (a) X created at t0; the removal from X and the add to Y applied by an instance 50 ms behind.
  const a = await story();
  await a.w.sdk.removeTenant(a.x.zrn, a.w.tenant);
  await apply(a.w.code, a.x.zrn);
  await a.w.sdk.addTenant(a.w.zrn, a.w.tenant);
  await apply(a.w.code, a.w.zrn);
  await changedAt(a.w.zrn, a.w.tenant, new Date(t0 - 5_000)); // Y's changes, before all
  await createdAt(a.x.zrn, new Date(t0));
  await changedAt(a.x.zrn, a.w.tenant, new Date(t0 - 30), { change: 'remove' });
  await changedAt(a.w.zrn, a.w.tenant, new Date(t0 - 20), { last: true });
  const now = await resolveDepositHolder(db, a.w.code, a.w.tenant, 'joint', new Date());
  assert.deepEqual([now.zrn, now.ownerParticipantCode], [a.w.zrn, a.w.holder], '(a) Y, its tenancy now');

  // (b) The removal from Y at t0; X's creation applied by an instance 10 ms behind; the removal from X at t0 + 1 s.
  const b = await story();
  await b.w.sdk.removeTenant(b.x.zrn, b.w.tenant);
  await apply(b.w.code, b.x.zrn);
  await changedAt(b.w.zrn, b.w.tenant, new Date(t0 - 5_000), { change: 'add' });
  await changedAt(b.w.zrn, b.w.tenant, new Date(t0), { change: 'remove' });
  await createdAt(b.x.zrn, new Date(t0 - 10));
  await changedAt(b.x.zrn, b.w.tenant, new Date(t0 + 1_000), { change: 'remove' });
  const during = await resolveDepositHolder(db, b.w.code, b.w.tenant, 'joint', new Date(t0 + 500));
  assert.deepEqual(
    [during.zrn, during.ownerParticipantCode],
    [b.x.zrn, b.creator],
    '(b) X, its tenancy then',
  );

  // (c) The removal from Y applied by an instance 100 ms ahead, after X's creation and removal by its own clock
  // (review): the participant holds no tenancy now, and no deposit made now funds X.
  const c = await story();
  await c.w.sdk.removeTenant(c.x.zrn, c.w.tenant);
  await apply(c.w.code, c.x.zrn);
  await changedAt(c.w.zrn, c.w.tenant, new Date(t0 - 5_000), { change: 'add' });
  await changedAt(c.w.zrn, c.w.tenant, new Date(t0 + 100), { change: 'remove' });
  await createdAt(c.x.zrn, new Date(t0 + 10));
  await changedAt(c.x.zrn, c.w.tenant, new Date(t0 + 50), { change: 'remove' });
  const refused = await refusal(resolveDepositHolder(db, c.w.code, c.w.tenant, 'joint', new Date()));
  assert.match(refused.message, /no longer a tenant/, '(c)');
});
