import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';
import { randomUUID } from 'node:crypto';
import { sql } from 'kysely';
import pg from 'pg';
import type { CustomerAccountDetails } from '../../src/contract/accounts.schemas.ts';
import { accountsJobRunner } from '../helpers/accounts-jobs.ts';
import { startTestService, type PlatformFixture, type TestService } from '../helpers/test-service.ts';

/**
 * POST /accounts while the creation is still pending and once it is applied. The service runs without its
 * worker (SVC_ROLE=api), so that "accepted, not created yet" is a state the test holds for as long as it
 * likes; the job is then run by a separate graphile-worker pass, as in tenants.test.ts.
 */
let svc: TestService;
let accountsJobs: ReturnType<typeof accountsJobRunner>;
let a: PlatformFixture;

before(async () => {
  svc = await startTestService();
  accountsJobs = accountsJobRunner(svc);
  a = await svc.newPlatform();
});
after(async () => {
  await accountsJobs?.close();
  await svc?.close();
});

/** A worker that starts now, runs every queued accounts job to completion, and stops. */
const runJobs = () => accountsJobs.run();

const post = (body: Record<string, unknown>) => a.client.send('POST', '/accounts', { body });
const errorsOf = (res: { body: unknown }) => (res.body as { errors: string[] }).errors;

async function creationRequests(holder: string) {
  return svc.runtime.store.db
    .selectFrom('customer_account_requests')
    .select(['zrn', 'tier', 'applied_at'])
    .where('participant_code', '=', holder)
    .execute();
}

async function creationJobs(): Promise<number> {
  const result = await sql<{ n: number }>`
    select count(*)::int as n from graphile_worker.jobs
    where task_identifier = 'accounts.create_customer_account'`.execute(svc.runtime.store.db);
  return result.rows[0]!.n;
}

async function memberships(label: string, codes: string[]) {
  return svc.runtime.store.db
    .selectFrom('account_memberships')
    .select(['participant_code', 'role', 'zrn'])
    .where('platform_code', '=', a.platform.platform_code)
    .where('account_label', '=', label)
    .where('participant_code', 'in', codes)
    .orderBy('participant_code')
    .execute();
}

describe('POST /accounts: a (participant_code, account_label) pair is submitted once', () => {
  test('a second submission while the creation is pending → 409 naming the pair; nothing is written', async () => {
    const holder = (await svc.newParticipant(a.platform.platform_code)).participant_code;
    const tenant = (await svc.newParticipant(a.platform.platform_code)).participant_code;
    const body = { participant_code: holder, account_label: 'joint', type: 'jtic', tier: 'pro', tenants: [] };
    const first = await post(body);
    assert.equal(first.status, 202, JSON.stringify(first.body));
    const [request] = await creationRequests(holder);
    assert.equal(request!.applied_at, null, 'accepted, not created yet');
    const jobs = await creationJobs();

    // vendor POST /accounts: "submitting the same pair a second time returns an error rather than creating a
    // duplicate", whether the second one repeats the first or not.
    for (const again of [body, { ...body, tier: 'gold' }, { ...body, tenants: [tenant] }]) {
      const res = await post(again);
      assert.equal(res.status, 409, JSON.stringify(again));
      assert.deepEqual(Object.keys(res.body as object), ['errors']);
      assert.deepEqual(errorsOf(res), [
        `customer account for (participant_code ${holder}, account_label joint) was already submitted and is being created as ${request!.zrn}`,
      ]);
    }
    // Nothing half-written by the refused ones: one request (the first one's details), one job, and the
    // tenant named by the last one claims nothing under the label.
    assert.deepEqual(
      (await creationRequests(holder)).map((r) => [r.zrn, r.tier]),
      [[request!.zrn, 'pro']],
    );
    assert.equal(await creationJobs(), jobs);
    assert.deepEqual(await memberships('joint', [holder, tenant]), [
      { participant_code: holder, role: 'holder', zrn: request!.zrn },
    ]);

    await runJobs();
    const details = await a.client.send<{ message: CustomerAccountDetails }>(
      'GET',
      `/accounts/${request!.zrn}/details`,
    );
    assert.equal(details.status, 200);
    assert.equal(details.body.message.tier, 'pro');
    // Created now: a second submission names the existing account.
    const res = await post(body);
    assert.equal(res.status, 409);
    assert.deepEqual(errorsOf(res), [
      `customer account for (participant_code ${holder}, account_label joint) already exists: ${request!.zrn}`,
    ]);
    assert.equal((await creationRequests(holder)).length, 1);
  });

  test('the same participant with another label, and another participant with the label, are other pairs', async () => {
    const holder = (await svc.newParticipant(a.platform.platform_code)).participant_code;
    const other = (await svc.newParticipant(a.platform.platform_code)).participant_code;
    const base = { account_label: 'savings', type: 'individual', tier: 'lite' };
    assert.equal((await post({ ...base, participant_code: holder })).status, 202);
    assert.equal((await post({ ...base, participant_code: holder, account_label: 'travel' })).status, 202);
    assert.equal((await post({ ...base, participant_code: other })).status, 202);
    assert.equal((await post({ ...base, participant_code: other })).status, 409);
    assert.equal((await creationRequests(holder)).length, 2);
  });
});

describe('POST /accounts racing another request for a tenant', () => {
  test("a tenant's pair claimed by a request accepted meanwhile → 409 naming the tenant, not the holder", async () => {
    const holder = (await svc.newParticipant(a.platform.platform_code)).participant_code;
    const tenant = (await svc.newParticipant(a.platform.platform_code)).participant_code;
    // The other request, caught between its check and its commit: its claim of the tenant's pair is written and
    // not committed, so this request's check does not see it and its own claim waits for it.
    const otherZrn = `zrn:svc:us:account:customer:${randomUUID()}`;
    const other = new pg.Client({ connectionString: svc.database.url });
    await other.connect();
    try {
      await other.query('begin');
      await other.query(
        `insert into account_memberships (platform_code, participant_code, account_label, zrn, role, effective_at)
         values ($1, $2, 'raced', $3, 'tenant', null)`,
        [a.platform.platform_code, tenant, otherZrn],
      );
      const response = post({
        participant_code: holder,
        account_label: 'raced',
        type: 'jtic',
        tier: 'pro',
        tenants: [tenant],
      });
      for (;;) {
        const { rows } = await sql<{ n: number }>`
          select count(*)::int as n from pg_stat_activity
          where datname = current_database() and wait_event_type = 'Lock'`.execute(svc.runtime.store.db);
        if (rows[0]!.n > 0) break;
        await new Promise((resolve) => setTimeout(resolve, 20));
      }
      await other.query('commit');
      const res = await response;
      assert.equal(res.status, 409, JSON.stringify(res.body));
      assert.deepEqual(errorsOf(res), [
        `tenants: participant ${tenant} already is a tenant of account ${otherZrn} (pending) with account_label raced; a participant acts for one account per label`,
      ]);
      // Nothing of the refused request: no creation request, and the holder claims nothing under the label.
      assert.deepEqual(await creationRequests(holder), []);
      assert.deepEqual(
        (await memberships('raced', [holder, tenant])).map((m) => m.participant_code),
        [tenant],
      );
    } finally {
      await other.end();
    }
  });
});

describe('customer_account_status_changed on creation by the job', () => {
  test('the payload is exactly the GET /accounts/{zrn}/details object at that moment', async () => {
    const holder = (await svc.newParticipant(a.platform.platform_code)).participant_code;
    const tenant = (await svc.newParticipant(a.platform.platform_code)).participant_code;
    const advisor = (await svc.newParticipant(a.platform.platform_code)).participant_code;
    const res = await post({
      participant_code: holder,
      account_label: 'family',
      type: 'jtic',
      tier: 'pro',
      prefunded: false,
      tenants: [tenant],
      financial_advisors: [advisor],
    });
    assert.equal(res.status, 202, JSON.stringify(res.body));
    await runJobs();
    const [request] = await creationRequests(holder);
    const notes = await svc.runtime.store.db
      .selectFrom('webhook_notifications')
      .select(['payload_type', 'payload'])
      .where('resource_key', '=', `account:${request!.zrn}`)
      .execute();
    assert.deepEqual(
      notes.map((n) => n.payload_type),
      ['customer_account_status_changed'],
    );
    const details = await a.client.send<{ message: CustomerAccountDetails }>(
      'GET',
      `/accounts/${request!.zrn}/details`,
    );
    assert.equal(details.status, 200);
    assert.deepEqual(details.body.message.tenants, [tenant]);
    assert.deepEqual(details.body.message.financial_advisors, [advisor]);
    assert.deepEqual(notes[0]!.payload, details.body.message);
  });
});
