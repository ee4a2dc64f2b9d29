import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import type {
  BalanceAccount,
  CustomerAccountDetails,
  ListAccountsResponse,
} from '../../src/contract/accounts.schemas.ts';
import { AccountsResource } from '../../src/sdk/resources/accounts.ts';
import { assertOtherPlatformForbidden } from '../helpers/ownership.ts';
import { startTestService, type PlatformFixture, type TestService } from '../helpers/test-service.ts';
import { assertNoFieldsBeyondVendor, assertVendorSchema } from '../helpers/vendor-schema.ts';

/**
 * Issue 5, point 1 (reads and asynchronous creation) and point 6 for GET /accounts; the service runs its
 * worker (SVC_ROLE=all), so POST /accounts is applied by the real job, which the tests wait for with a
 * bounded poll.
 */
let svc: TestService;
before(async () => {
  svc = await startTestService({ env: { SVC_ROLE: 'all' } });
});
after(() => svc?.close());

async function waitFor<T>(what: string, probe: () => Promise<T | undefined>, timeoutMs = 15_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await probe();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 25));
  }
}

/** The account notifications of the platform, oldest first. */
async function accountNotifications(platformCode: string): Promise<CustomerAccountDetails[]> {
  const rows = await svc.runtime.store.db
    .selectFrom('webhook_notifications')
    .select('payload')
    .where('platform_code', '=', platformCode)
    .where('payload_type', '=', 'customer_account_status_changed')
    .orderBy('seq')
    .execute();
  return rows.map((r) => r.payload as CustomerAccountDetails);
}

/** The platform learns the zrn of an account created through POST /accounts from its notification. */
function createdAccount(platformCode: string, participantCode: string, label: string) {
  return waitFor(`account ${participantCode}/${label}`, async () =>
    (await accountNotifications(platformCode)).find(
      (n) => n.participant_code === participantCode && n.account_label === label,
    ),
  );
}

async function credit(participantCode: string, label: string, asset: string, amount: string, type?: string) {
  await svc.admin.post('/balances', {
    participant_code: participantCode,
    account_label: label,
    asset,
    amount,
    ...(type ? { account_type: type } : {}),
  });
}

describe('GET /accounts', () => {
  let a: PlatformFixture;
  let b: PlatformFixture;
  let p1: string;
  let p2: string;
  before(async () => {
    a = await svc.newPlatform();
    b = await svc.newPlatform();
    p1 = (await svc.newParticipant(a.platform.platform_code)).participant_code;
    p2 = (await svc.newParticipant(a.platform.platform_code)).participant_code;
    const q = (await svc.newParticipant(b.platform.platform_code)).participant_code;
    await credit(p1, 'general', 'USD', '100.25');
    await credit(p1, 'general', 'BTC', '0.000000015');
    await credit(p1, 'savings', 'USD', '7', 'collateral');
    await credit(p2, 'general', 'USD', '1');
    await credit(q, 'general', 'USD', '999');
  });

  const list = async (query: Record<string, string | number> = {}, client = () => a.client) => {
    const res = await client().send<ListAccountsResponse>('GET', '/accounts', { query });
    assert.equal(res.status, 200, JSON.stringify(res.body));
    assertVendorSchema(res.body, 'GetAccountsResponse');
    return res.body;
  };

  test("lists the platform's balance accounts in the vendor's shape, and only them", async () => {
    const body = await list();
    assert.equal(body.message.length, 4);
    assert.equal(body.page, 1);
    assert.equal(body.total_pages, 1);
    assert.deepEqual(Object.keys(body).sort(), ['message', 'page', 'total_pages']);
    const usd = body.message.find(
      (m) => m.account_owner === p1 && m.asset === 'USD' && m.account_label === 'general',
    )!;
    assert.equal(usd.balance, '100.25');
    assert.equal(usd.account_type, 'available');
    assert.equal(usd.account_group, a.platform.platform_code);
    assert.ok(Number.isInteger(usd.last_update));
    // Decimal strings, never floats: 1.5e-8 stays a plain decimal.
    assert.equal(body.message.find((m) => m.asset === 'BTC')!.balance, '0.000000015');
    assert.ok(body.message.every((m) => m.account_group === a.platform.platform_code));
  });

  test("the vendor's filters: account_owner, account_label, account_group, account_type, asset", async () => {
    const owners = (rows: BalanceAccount[]) =>
      rows.map((r) => `${r.account_owner}/${r.account_label}/${r.asset}`);
    assert.equal((await list({ account_owner: p1 })).message.length, 3);
    assert.deepEqual(owners((await list({ account_owner: p2 })).message), [`${p2}/general/USD`]);
    assert.deepEqual(owners((await list({ asset: 'BTC' })).message), [`${p1}/general/BTC`]);
    // The vendor's Asset values name a network (BTC.BTC, USDC.ETH); the ledger holds the asset without it, so a
    // client with the vendor's enum found nothing (probe).
    assert.deepEqual(owners((await list({ asset: 'BTC.BTC' })).message), [`${p1}/general/BTC`]);
    // A network no one knows is not read as its asset's (probe: USDC.XYZ listed the USDC balances).
    for (const asset of ['BTC.XYZ', 'BTC.', 'BTC..BTC']) {
      const res = await a.client.send<{ errors: string[] }>('GET', '/accounts', { query: { asset } });
      assert.equal(res.status, 400, JSON.stringify(res.body));
      assert.deepEqual(res.body.errors, [
        `asset: ${asset} is not an asset on a network this service knows (e.g. USDC.ETH; or the asset alone, e.g. USDC)`,
      ]);
    }
    assert.deepEqual(owners((await list({ account_label: 'savings' })).message), [`${p1}/savings/USD`]);
    assert.deepEqual(owners((await list({ account_type: 'collateral' })).message), [`${p1}/savings/USD`]);
    assert.equal((await list({ account_group: a.platform.platform_code })).message.length, 4);
    assert.equal((await list({ account_group: b.platform.platform_code })).message.length, 0);
    assert.equal(
      (await list({ account_owner: p1, asset: 'USD', account_label: 'general' })).message.length,
      1,
    );
    assert.equal((await list({ account_owner: 'ZZZZZZ' })).message.length, 0);
  });

  test('pages start at 1, do not overlap, and say how many there are', async () => {
    const first = await list({ page_size: 3 });
    const second = await list({ page_size: 3, page: 2 });
    const third = await list({ page_size: 3, page: 3 });
    assert.equal(first.message.length, 3);
    assert.equal(second.message.length, 1);
    assert.equal(third.message.length, 0);
    assert.equal(first.total_pages, 2);
    assert.equal(second.page, 2);
    const ids = [...first.message, ...second.message].map((m) => m.account_id);
    assert.equal(new Set(ids).size, 4);
    assert.equal((await list({ account_owner: 'ZZZZZZ' })).total_pages, 0);
  });

  test('bad query values → 400 naming the parameter', async () => {
    for (const [query, field] of [
      [{ page: 0 }, 'page'],
      [{ page: 'x' }, 'page'],
      [{ page_size: 101 }, 'page_size'],
      [{ account_type: 'checking' }, 'account_type'],
      [{ account_owner: 'TOOLONG1' }, 'account_owner'],
      // A misspelt filter is refused, not ignored (which listed every balance).
      [{ acount_owner: 'ABC123' }, 'acount_owner'],
    ] as const) {
      const res = await a.client.send('GET', '/accounts', { query });
      assert.equal(res.status, 400, JSON.stringify(query));
      const errors = (res.body as { errors: string[] }).errors;
      assert.ok(
        errors.some((e) => e.startsWith(`${field}: `)),
        `${JSON.stringify(query)} → ${JSON.stringify(errors)}`,
      );
    }
  });

  test("another platform's participant as account_owner → 403 (spec 5.4)", async () => {
    await assertOtherPlatformForbidden(
      { method: 'GET', path: '/accounts', options: { query: { account_owner: p1 } } },
      { owner: a.client, other: b.client },
    );
  });

  test('the SDK lists with the same filters', async () => {
    const sdk = new AccountsResource(a.client);
    const body = await sdk.list({ account_owner: p1, asset: 'USD' });
    assert.equal(body.message.length, 2);
  });
});

describe('POST /accounts', () => {
  let a: PlatformFixture;
  before(async () => {
    a = await svc.newPlatform();
  });

  test('202 {} now; a job creates the account and records customer_account_status_changed', async () => {
    const holder = (await svc.newParticipant(a.platform.platform_code)).participant_code;
    const tenant = (await svc.newParticipant(a.platform.platform_code)).participant_code;
    const res = await a.client.send('POST', '/accounts', {
      body: {
        participant_code: holder,
        account_label: 'joint-1',
        type: 'jtic',
        tier: 'pro',
        prefunded: false,
        tenants: [tenant],
      },
    });
    assert.equal(res.status, 202, JSON.stringify(res.body));
    assert.deepEqual(res.body, {});
    assertVendorSchema(res.body, 'CustomerAccountResponse');

    const note = await createdAccount(a.platform.platform_code, holder, 'joint-1');
    const sdk = new AccountsResource(a.client);
    const details = await sdk.details(note.zrn);
    assertVendorSchema({ message: details }, 'CustomerAccountResponse');
    assert.match(details.zrn, /^zrn:svc:us:account:customer:[0-9a-f-]{36}$/);
    assert.equal(details.participant_code, holder);
    assert.equal(details.platform_code, a.platform.platform_code);
    assert.equal(details.account_group, a.platform.platform_code);
    assert.equal(details.type, 'jtic');
    assert.equal(details.tier, 'pro');
    assert.equal(details.prefunded, false);
    assert.equal(details.status, 'open');
    assert.deepEqual(details.tenants, [tenant]);
    assert.deepEqual(details.financial_advisors, []);
    const { pending_tenant_changes, ...unasked } = details;
    assert.deepEqual(pending_tenant_changes, []);
    // wire-contract §5: the payload is the details object itself (as given unasked: the vendor's, without the
    // pending changes the SDK asks for), nothing added (no `timestamp`).
    assert.deepEqual(note, unasked);
  });

  test('the pair (participant_code, account_label) is submitted once: any second submission → 409', async () => {
    const holder = (await svc.newParticipant(a.platform.platform_code)).participant_code;
    const body = { participant_code: holder, account_label: 'general', type: 'individual', tier: 'lite' };
    const pair = new RegExp(`\\(participant_code ${holder}, account_label general\\)`);
    // vendor POST /accounts: "submitting the same pair a second time returns an error rather than creating a
    // duplicate". Concurrent duplicates too: exactly one is accepted, the others get the wire 409 body.
    const answers = await Promise.all([0, 1, 2, 3].map(() => a.client.send('POST', '/accounts', { body })));
    assert.deepEqual(
      answers.map((r) => r.status).sort(),
      [202, 409, 409, 409],
      JSON.stringify(answers.map((r) => r.body)),
    );
    for (const refused of answers.filter((r) => r.status === 409)) {
      assert.deepEqual(Object.keys(refused.body as object), ['errors']);
      const errors = (refused.body as { errors: string[] }).errors;
      assert.equal(errors.length, 1);
      assert.match(errors[0]!, pair);
    }
    const note = await createdAccount(a.platform.platform_code, holder, 'general');

    // Once created: the very same request, and one with other details, are both duplicates naming the account.
    for (const again of [body, { ...body, prefunded: true }, { ...body, tier: 'gold' }]) {
      const res = await a.client.send('POST', '/accounts', { body: again });
      assert.equal(res.status, 409, JSON.stringify(again));
      assert.deepEqual(Object.keys(res.body as object), ['errors']);
      const [message] = (res.body as { errors: string[] }).errors;
      assert.match(message!, pair);
      assert.match(message!, new RegExp(`already exists: ${note.zrn}$`));
    }
    const accounts = await svc.runtime.store.db
      .selectFrom('customer_accounts')
      .select('zrn')
      .where('participant_code', '=', holder)
      .execute();
    assert.deepEqual(
      accounts.map((r) => r.zrn),
      [note.zrn],
    );
    const notes = (await accountNotifications(a.platform.platform_code)).filter(
      (n) => n.participant_code === holder,
    );
    assert.equal(notes.length, 1);
  });

  test('an account the operator created already → 409', async () => {
    const holder = (await svc.newParticipant(a.platform.platform_code)).participant_code;
    await svc.newCustomerAccount(a.platform.platform_code, holder, 'general');
    const res = await a.client.send('POST', '/accounts', {
      body: { participant_code: holder, account_label: 'general', type: 'individual', tier: 'lite' },
    });
    assert.equal(res.status, 409);
    assert.match(
      (res.body as { errors: string[] }).errors[0]!,
      new RegExp(`\\(participant_code ${holder}, account_label general\\) already exists: zrn:svc:`),
    );
  });

  test('validation: every bad field is named; participants must be onboarded customers of the caller', async () => {
    const missing = await a.client.send('POST', '/accounts', { body: {} });
    assert.equal(missing.status, 400);
    assert.deepEqual((missing.body as { errors: string[] }).errors.sort(), [
      'account_label: is required',
      'participant_code: is required',
      'tier: is required',
      'type: is required',
    ]);
    const holder = (await svc.newParticipant(a.platform.platform_code)).participant_code;
    const submitted = (await svc.newParticipant(a.platform.platform_code, { status: 'submitted' }))
      .participant_code;
    const b = await svc.newPlatform();
    const foreign = (await svc.newParticipant(b.platform.platform_code)).participant_code;
    const base = { account_label: 'x', type: 'individual', tier: 'pro' };
    const cases: [Record<string, unknown>, RegExp][] = [
      [{ ...base, participant_code: 'ZZZZZZ' }, /^participant_code: participant ZZZZZZ not found/],
      // wire-contract §9: a participant named in the body that is not the caller's is unknown: 400.
      [
        { ...base, participant_code: foreign },
        new RegExp(`^participant_code: participant ${foreign} not found`),
      ],
      [{ ...base, participant_code: submitted }, /^participant_code: .* not onboarded/],
      [{ ...base, participant_code: holder, tenants: [holder] }, /^tenants: .*primary account holder/],
      [{ ...base, participant_code: holder, tenants: [foreign] }, /^tenants: .*not found/],
      [
        { ...base, participant_code: holder, type: 'business' },
        /^tenants: is required for account type business/,
      ],
      [{ ...base, participant_code: holder, type: 'savings' }, /^type: /],
      [{ ...base, participant_code: holder, tier: 'platinum' }, /^tier: /],
      [{ ...base, participant_code: holder, prefunded: 'yes' }, /^prefunded: /],
      [{ ...base, participant_code: holder, account_label: '' }, /^account_label: /],
      [{ ...base, participant_code: holder, region: 'mars' }, /^region: /],
    ];
    for (const [body, expected] of cases) {
      const res = await a.client.send('POST', '/accounts', { body });
      assert.equal(res.status, 400, JSON.stringify(body));
      const errors = (res.body as { errors: string[] }).errors;
      assert.ok(
        errors.some((e) => expected.test(e)),
        `${JSON.stringify(body)} → ${JSON.stringify(errors)}`,
      );
    }
  });
});

describe('GET /accounts/{zrn}/details', () => {
  test('the vendor shape, for the raw and the percent-encoded zrn; 404 unknown; 403 other platform', async () => {
    const a = await svc.newPlatform();
    const b = await svc.newPlatform();
    const holder = (await svc.newParticipant(a.platform.platform_code)).participant_code;
    const account = await svc.newCustomerAccount(a.platform.platform_code, holder, 'general');
    for (const path of [
      `/accounts/${account.zrn}/details`,
      `/accounts/${encodeURIComponent(account.zrn)}/details`,
    ]) {
      const res = await a.client.send<{ message: CustomerAccountDetails }>('GET', path);
      assert.equal(res.status, 200, path);
      const misspelt = await a.client.send('GET', path, { query: { participant_cod: holder } });
      assert.equal(misspelt.status, 400, path);
      assert.deepEqual(misspelt.body, { errors: ['participant_cod: is not allowed'] });
      assertVendorSchema(res.body, 'CustomerAccountResponse');
      assert.equal(res.body.message.zrn, account.zrn);
      assert.deepEqual(res.body.message.tenants, []);
      // Only the vendor's fields unless asked: a strict generated client refuses any other (probe).
      assertNoFieldsBeyondVendor(res.body.message, 'CustomerAccountResponse');
      const asked = await a.client.send<{ message: CustomerAccountDetails }>('GET', path, {
        query: { include: 'pending_tenant_changes' },
      });
      assert.equal(asked.status, 200, JSON.stringify(asked.body));
      assert.deepEqual(asked.body.message, { ...res.body.message, pending_tenant_changes: [] });
      const unknownInclude = await a.client.send('GET', path, { query: { include: 'everything' } });
      assert.equal(unknownInclude.status, 400, JSON.stringify(unknownInclude.body));
      // The one value it takes is said (review: "must be equal to constant").
      assert.deepEqual(unknownInclude.body, { errors: ['include: must be pending_tenant_changes'] });
    }
    const unknown = await a.client.send(
      'GET',
      '/accounts/zrn:svc:eu:account:customer:11111111-2222-4333-8444-555555555555/details',
    );
    assert.equal(unknown.status, 404);
    assert.deepEqual(unknown.body, { error: 'Not Found' });
    await assertOtherPlatformForbidden(
      { method: 'GET', path: `/accounts/${account.zrn}/details` },
      { owner: a.client, other: b.client },
    );
    // Another platform's participant named in the query: 403, as in the other lists' participant filters;
    // a code nobody has is the caller's mistake (400).
    const foreign = (await svc.newParticipant(b.platform.platform_code)).participant_code;
    const named = await a.client.send('GET', `/accounts/${account.zrn}/details?participant_code=${foreign}`);
    assert.equal(named.status, 403, JSON.stringify(named.body));
    assert.deepEqual(named.body, {
      error: true,
      message: `participant ${foreign} belongs to another platform`,
    });
    const nobody = await a.client.send('GET', `/accounts/${account.zrn}/details?participant_code=ZZZZZ9`);
    assert.equal(nobody.status, 400, JSON.stringify(nobody.body));
    const own = await a.client.send('GET', `/accounts/${account.zrn}/details?participant_code=${holder}`);
    assert.equal(own.status, 200, JSON.stringify(own.body));
  });

  test('POST /admin/customer_accounts answers the same details object and records it as the notification', async () => {
    const a = await svc.newPlatform();
    const holder = (await svc.newParticipant(a.platform.platform_code)).participant_code;
    const created = await svc.newCustomerAccount(a.platform.platform_code, holder, 'ops');
    const { pending_tenant_changes, ...details } = await new AccountsResource(a.client).details(created.zrn);
    assert.deepEqual(pending_tenant_changes, []);
    assert.deepEqual(created, details);
    const note = (await accountNotifications(a.platform.platform_code)).find((n) => n.zrn === created.zrn)!;
    assert.deepEqual(note, details);
  });
});

describe('with the worker running', () => {
  test('a tenant added over HTTP is in effect once the worker applied it, then removed the same way', async () => {
    const a = await svc.newPlatform();
    const sdk = new AccountsResource(a.client);
    const holder = (await svc.newParticipant(a.platform.platform_code)).participant_code;
    const tenant = (await svc.newParticipant(a.platform.platform_code)).participant_code;
    const { zrn } = await svc.newCustomerAccount(a.platform.platform_code, holder, 'general');
    await sdk.addTenant(zrn, tenant);
    await waitFor('tenant in effect', async () =>
      (await sdk.details(zrn)).tenants.includes(tenant) ? true : undefined,
    );
    await sdk.removeTenant(zrn, tenant);
    const final = await waitFor('tenant removed', async () => {
      const details = await sdk.details(zrn);
      return details.tenants.length === 0 && details.pending_tenant_changes.length === 0
        ? details
        : undefined;
    });
    assert.deepEqual(final.tenants, []);
    const notes = (await accountNotifications(a.platform.platform_code)).filter((n) => n.zrn === zrn);
    assert.deepEqual(
      notes.map((n) => n.tenants),
      [[], [tenant], []],
    );
  });
});
