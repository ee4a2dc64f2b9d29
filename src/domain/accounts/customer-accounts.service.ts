import type {
  BalanceAccount,
  CreateCustomerAccountRequest,
  CustomerAccountDetails,
  ListAccountsQuery,
  PendingTenantChange,
} from '../../contract/accounts.schemas.ts';
import { findPlatform } from '../platforms/platforms.repository.ts';
import { REVIVE_BATCH } from '../../jobs/cron.ts';
import { makeZrn } from '../../contract/identifiers.ts';
import { toDecimalString } from '../../lib/decimal.ts';
import { newUuid } from '../../lib/ids.ts';
import { enqueueJob } from '../../jobs/enqueue.ts';
import { inOneSnapshot, type Executor, type Trx } from '../../store/database.ts';
import { ledgerAsset } from '../quotes/pricing.ts';
import { networkAssetProblem } from '../quotes/network-assets.ts';
import type { DomainDeps } from '../deps.ts';
import {
  conflict,
  forbidden,
  invalid,
  notFound,
  pgErrorCode,
  PG_UNIQUE_VIOLATION,
  type DomainError,
} from '../errors.ts';
import {
  codeOnOtherPlatform,
  findParticipant,
  findPlatformParticipant,
} from '../participants/participants.repository.ts';
import { lockParticipantFunding } from '../funding/funding.repository.ts';
import { recordNotification } from '../webhooks/outbox.ts';
import { findActingAccount, resolveAccountHolder } from './account-holder.ts';
import { ACCOUNT_TASKS } from './accounts.jobs.ts';
import {
  countBalanceAccounts,
  listBalanceAccounts,
  withBalancesUnder,
} from './balance-accounts.repository.ts';
import {
  accountExists,
  activateAccountMemberships,
  deleteTenantMembership,
  findCreationRequest,
  findMemberships,
  findPlatformAccount,
  insertCreationRequest,
  insertMemberships,
  listEffectiveTenants,
  lockPendingCreationRequest,
  markCreationApplied,
  type CustomerAccountRow,
  type MembershipRow,
} from './customer-accounts.repository.ts';
import { insertTenantChange, listPendingChanges, type TenantChangeRow } from './tenants.repository.ts';
import { pageFields, pageOf, rowsAndCount } from '../paging.ts';

export type { CustomerAccountDetails } from '../../contract/accounts.schemas.ts';
import type { Region } from '../../contract/wire-values.ts';

/**
 * The vendor's customer account shape (CustomerAccountResponse.message), with our pending tenant changes when they
 * are given (asked for: `include=pending_tenant_changes`).
 */
export function customerAccountDetails(
  row: CustomerAccountRow,
  tenants: string[],
  pending?: TenantChangeRow[],
): CustomerAccountDetails {
  return {
    zrn: row.zrn,
    participant_code: row.participant_code,
    platform_code: row.platform_code,
    prefunded: row.prefunded,
    account_label: row.account_label,
    // The platform's code is the account group of its customers' accounts.
    account_group: row.platform_code,
    type: row.type,
    ...(row.tier ? { tier: row.tier } : {}),
    status: row.status,
    tenants,
    financial_advisors: row.financial_advisors ?? [],
    ...(pending && {
      pending_tenant_changes: pending.map((change): PendingTenantChange => ({
        participant_code: change.participant_code,
        change: change.change,
        accepted_at: change.accepted_at.getTime(),
      })),
    }),
  };
}

/**
 * The details of an account row already read, with its tenants (and, asked for, its pending changes) as they
 * stand in `db` (a transaction sees its own changes).
 */
export async function accountDetailsOf(
  db: Executor,
  row: CustomerAccountRow,
  withPending = false,
): Promise<CustomerAccountDetails> {
  const [tenants, pending] = await Promise.all([
    listEffectiveTenants(db, row.platform_code, row.zrn),
    withPending ? listPendingChanges(db, row.platform_code, row.zrn) : undefined,
  ]);
  return customerAccountDetails(row, tenants, pending);
}

/** spec 5.4, wire-contract §9: the platform's account, else 403 when it is another platform's, else 404. */
export async function requirePlatformAccount(
  db: Executor,
  platformCode: string,
  zrn: string,
  lock = false,
): Promise<CustomerAccountRow> {
  const row = await findPlatformAccount(db, platformCode, zrn, lock);
  if (row) return row;
  if (await accountExists(db, zrn)) throw forbidden(`account ${zrn} belongs to another platform`);
  throw notFound(`account ${zrn} not found`);
}

/**
 * wire-contract §5: the account notification's payload is the GET /accounts/{zrn}/details object, exactly, as
 * it stands in `trx` (with the change that causes the notification); unlike the trade payload it carries no
 * `timestamp` of its own. Returns that object.
 */
export async function recordAccountNotification(
  trx: Executor,
  row: CustomerAccountRow,
): Promise<CustomerAccountDetails> {
  const details = await accountDetailsOf(trx, row);
  await recordNotification(trx, {
    platformCode: details.platform_code,
    payloadType: 'customer_account_status_changed',
    resourceKey: `account:${details.zrn}`,
    payload: details,
  });
  return details;
}

/**
 * A participant with balances of its own under the label cannot become a tenant there: naming it with the
 * label would act for the holder's account, and its own funds would be out of reach (and, once the tenancy
 * ended, refused with the former tenant's 403).
 */
export async function refuseTenantsWithOwnBalances(
  trx: Executor,
  platformCode: string,
  field: string,
  participantCodes: string[],
  accountLabel: string,
): Promise<void> {
  const holding = await withBalancesUnder(trx, platformCode, participantCodes, accountLabel);
  if (holding.length === 0) return;
  throw conflict(
    `${field}: participant ${holding.join(', ')} holds balances of its own under account_label ${accountLabel}; as a tenant under that label it could not reach them`,
  );
}

/**
 * Of the participants whose pending tenancy under the label is about to take effect, those that came to hold
 * balances of their own there meanwhile (until then, named with the label, they act for themselves). Their
 * deposits are held off until the caller's transaction ends (the funding lock a deposit takes first), so one
 * in flight is either seen here or, committed after, credits the account it then acts for.
 */
export async function holdingOwnBalancesNow(
  trx: Trx,
  platformCode: string,
  participantCodes: string[],
  accountLabel: string,
): Promise<string[]> {
  for (const code of [...participantCodes].sort()) await lockParticipantFunding(trx, code);
  return withBalancesUnder(trx, platformCode, participantCodes, accountLabel);
}

/** Why a pending tenancy is settled without taking effect (tenant_changes.refused_reason, migration 0014). */
export function ownBalancesRefusal(participantCode: string, accountLabel: string): string {
  return `participant ${participantCode} came to hold balances of its own under account_label ${accountLabel} while it was to become a tenant; as a tenant under that label it could not reach them`;
}

/** Why a participant cannot take a (participant, label) pair: it already names another account. */
export function membershipConflict(
  field: string,
  membership: MembershipRow,
  accountLabel: string,
): DomainError {
  const who = membership.participant_code;
  const what =
    membership.role === 'holder'
      ? `holds account ${membership.zrn}`
      : `is a tenant of account ${membership.zrn}`;
  const pending = membership.effective_at ? '' : ' (pending)';
  return conflict(
    `${field}: participant ${who} already ${what}${pending} with account_label ${accountLabel}; a participant acts for one account per label`,
  );
}

export function uniqueViolationToConflict(error: unknown, message: string): unknown {
  return pgErrorCode(error) === PG_UNIQUE_VIOLATION ? conflict(message) : error;
}

/** A unique violation of account_memberships: a (participant, label) pair was claimed by a concurrent request. */
function pairClaimedMeanwhile(error: unknown): boolean {
  return (
    pgErrorCode(error) === PG_UNIQUE_VIOLATION &&
    (error as { constraint?: unknown }).constraint === 'account_memberships_pkey'
  );
}

export interface NewCustomerAccount {
  platform_code: string;
  participant_code: string;
  region?: Region;
  account_label?: string;
  type?: string;
  tier?: string;
  prefunded?: boolean;
}

/**
 * Operator API (DESIGN §3): creates the account row, its holder membership and its notification in the
 * caller's transaction. The label must not already name an account for the participant (as holder or
 * tenant, issue 5), so that resolveAccountHolder stays unambiguous.
 */
export async function insertCustomerAccount(
  trx: Trx,
  input: NewCustomerAccount,
  timestamp: number,
): Promise<CustomerAccountDetails> {
  const participant = await findPlatformParticipant(trx, input.platform_code, input.participant_code);
  if (!participant || participant.kind !== 'customer') {
    throw invalid(`participant_code: participant ${input.participant_code} not found for this platform`);
  }
  const label = input.account_label ?? 'general';
  const [existing] = await findMemberships(trx, input.platform_code, [input.participant_code], label);
  if (existing) throw membershipConflict('participant_code', existing, label);
  const region = input.region ?? 'us';
  const zrn = makeZrn(region, newUuid());
  try {
    const row = await trx
      .insertInto('customer_accounts')
      .values({
        zrn,
        platform_code: input.platform_code,
        participant_code: input.participant_code,
        account_label: label,
        region,
        type: input.type ?? 'individual',
        tier: input.tier ?? null,
        prefunded: input.prefunded ?? true,
        created_at: new Date(timestamp),
        updated_at: new Date(timestamp),
      })
      .returningAll()
      .executeTakeFirstOrThrow();
    await insertMemberships(trx, [
      {
        platform_code: row.platform_code,
        participant_code: row.participant_code,
        account_label: label,
        zrn,
        role: 'holder',
        effective_at: new Date(timestamp),
      },
    ]);
    return await recordAccountNotification(trx, row);
  } catch (error) {
    throw uniqueViolationToConflict(
      error,
      `customer account for ${input.participant_code} with label ${label} already exists`,
    );
  }
}

/**
 * 409 for a second submission of a (participant_code, account_label) pair (vendor POST /accounts): names the
 * pair and, when known, the account that has it or is being created for it.
 */
function duplicatePair(
  participantCode: string,
  accountLabel: string,
  account?: { zrn: string; pending: boolean },
): DomainError {
  const pair = `customer account for (participant_code ${participantCode}, account_label ${accountLabel})`;
  if (!account) return conflict(`${pair} was already submitted`);
  return conflict(
    account.pending
      ? `${pair} was already submitted and is being created as ${account.zrn}`
      : `${pair} already exists: ${account.zrn}`,
  );
}

/**
 * The job that creates a requested account, keyed by the request: added again (the sweep), it replaces the one
 * still waiting.
 */
function enqueueCreation(db: Executor, platformCode: string, requestId: string): Promise<void> {
  return enqueueJob(
    db,
    ACCOUNT_TASKS.createCustomerAccount,
    { platform_code: platformCode, request_id: requestId },
    { jobKey: `${ACCOUNT_TASKS.createCustomerAccount}:${requestId}` },
  );
}

export function createCustomerAccountsService(deps: DomainDeps) {
  const { db, clock } = deps;

  /** Each named participant must be an approved customer of the platform and not the holder (spec 2.1). */
  async function checkCoOwners(
    platformCode: string,
    holder: string,
    field: string,
    codes: string[],
  ): Promise<string[]> {
    const problems: string[] = [];
    for (const code of codes) {
      const participant = await findPlatformParticipant(db, platformCode, code);
      if (!participant || participant.kind !== 'customer') {
        problems.push(`${field}: participant ${code} not found`);
      } else if (participant.status !== 'approved') {
        problems.push(`${field}: participant ${code} is not onboarded (status ${participant.status})`);
      } else if (code === holder) {
        problems.push(`${field}: participant ${code} is the primary account holder`);
      }
    }
    return problems;
  }

  return {
    /** Operator API: synchronous creation (DESIGN §3). */
    async create(input: NewCustomerAccount): Promise<CustomerAccountDetails> {
      // The platform first: an unknown one (a participant's code given for it) blamed participant_code (probe).
      if (!(await findPlatform(db, input.platform_code)))
        throw invalid(`platform_code: platform ${input.platform_code} not found`);
      return db.transaction().execute((trx) => insertCustomerAccount(trx, input, clock.now()));
    },

    /**
     * POST /accounts: accepts a creation (202) that a job applies (vendor: "an asynchronous process").
     * vendor POST /accounts: the pair (participant_code, account_label) is the idempotency check, and
     * "submitting the same pair a second time returns an error rather than creating a duplicate": any second
     * submission of a pair that has an account or a pending creation is a duplicate entity (spec 7, 409),
     * whatever its other fields. The message names the pair and the account's zrn, so that a caller whose
     * first submission ended in a 502/504 learns from the 409 that it was accepted.
     */
    async requestCreation(platformCode: string, body: CreateCustomerAccountRequest): Promise<void> {
      const holder = body.participant_code;
      const participant = await findPlatformParticipant(db, platformCode, holder);
      if (!participant || participant.kind !== 'customer') {
        throw invalid(`participant_code: participant ${holder} not found`);
      }
      if (participant.status !== 'approved') {
        throw invalid(
          `participant_code: participant ${holder} is not onboarded (status ${participant.status})`,
        );
      }
      const tenants = body.tenants ?? [];
      const advisors = body.financial_advisors ?? [];
      const problems = [
        ...(await checkCoOwners(platformCode, holder, 'tenants', tenants)),
        ...(await checkCoOwners(platformCode, holder, 'financial_advisors', advisors)),
      ];
      // The vendor's PostCustomerAccountRequest requires tenants for every type but individual.
      if (body.type !== 'individual' && body.tenants === undefined) {
        problems.push(`tenants: is required for account type ${body.type}`);
      }
      if (problems.length > 0) throw invalid(...problems);

      const region: Region = body.region ?? 'us';
      const acceptedAt = new Date(clock.now());
      const requestId = newUuid();
      const zrn = makeZrn(region, newUuid());
      try {
        await db.transaction().execute(async (trx) => {
          const inserted = await insertCreationRequest(trx, {
            request_id: requestId,
            zrn,
            platform_code: platformCode,
            participant_code: holder,
            account_label: body.account_label,
            region,
            type: body.type,
            tier: body.tier,
            prefunded: body.prefunded ?? true,
            tenants,
            financial_advisors: advisors,
            accepted_at: acceptedAt,
          });
          if (!inserted) {
            // The pair was submitted before (this read sees the committed row that the insert waited for).
            const earlier = await findCreationRequest(trx, platformCode, holder, body.account_label);
            throw duplicatePair(
              holder,
              body.account_label,
              earlier && { zrn: earlier.zrn, pending: earlier.applied_at === null },
            );
          }
          // Claim every (participant, label) pair now, so that a concurrent claim of one of them fails here.
          const claimed = await findMemberships(trx, platformCode, [holder, ...tenants], body.account_label);
          for (const membership of claimed) {
            if (membership.participant_code === holder && membership.role === 'holder') {
              throw duplicatePair(holder, body.account_label, {
                zrn: membership.zrn,
                pending: membership.effective_at === null,
              });
            }
            throw membershipConflict(
              membership.participant_code === holder ? 'participant_code' : 'tenants',
              membership,
              body.account_label,
            );
          }
          await refuseTenantsWithOwnBalances(trx, platformCode, 'tenants', tenants, body.account_label);
          await insertMemberships(
            trx,
            [
              { participant_code: holder, role: 'holder' as const },
              ...tenants.map((code) => ({ participant_code: code, role: 'tenant' as const })),
            ].map((m) => ({
              ...m,
              platform_code: platformCode,
              account_label: body.account_label,
              zrn,
              effective_at: null,
            })),
          );
          await enqueueCreation(trx, platformCode, requestId);
        });
      } catch (error) {
        // A request accepted meanwhile claimed one of the pairs. A tenant's is named as the check above names it, read
        // now that the claim has committed (review: the 409 named the holder's pair, which nothing claimed).
        if (pairClaimedMeanwhile(error)) {
          const claimed = await findMemberships(db, platformCode, [holder, ...tenants], body.account_label);
          const tenant = claimed.find((m) => m.participant_code !== holder);
          if (tenant && !claimed.some((m) => m.participant_code === holder))
            throw membershipConflict('tenants', tenant, body.account_label);
        }
        throw uniqueViolationToConflict(
          error,
          `customer account for (participant_code ${holder}, account_label ${body.account_label}): a conflicting request was accepted first`,
        );
      }
    },

    /**
     * The recurring sweep (accounts.jobs.ts): a creation still pending `stalledAfterMs` after it was accepted has
     * its job added again, due now with its attempts afresh. A job that used up its attempts (a database
     * unreachable for days) left the account pending for good: its details 404, the same request a 409, its
     * (participant, label) pairs taken (review). Keyed, the job replaces one still waiting rather than doubling
     * it. Returns how many were revived.
     */
    async reviveStalledCreations(stalledAfterMs: number): Promise<number> {
      const stalled = await db
        .selectFrom('customer_account_requests')
        .select(['platform_code', 'request_id'])
        .where('applied_at', 'is', null)
        .where('accepted_at', '<', new Date(clock.now() - stalledAfterMs))
        .orderBy('accepted_at')
        .limit(REVIVE_BATCH)
        .execute();
      for (const { platform_code, request_id } of stalled)
        await enqueueCreation(db, platform_code, request_id);
      return stalled.length;
    },

    /**
     * The job of POST /accounts: creates the account with its tenants and records the notification, in one
     * transaction; a request already applied (a second run, a retry after a crash) changes nothing.
     */
    async applyCreation(platformCode: string, requestId: string): Promise<CustomerAccountDetails | null> {
      return db.transaction().execute(async (trx) => {
        const request = await lockPendingCreationRequest(trx, platformCode, requestId);
        if (!request) return null;
        const at = new Date(clock.now());
        const row = await trx
          .insertInto('customer_accounts')
          .values({
            zrn: request.zrn,
            platform_code: request.platform_code,
            participant_code: request.participant_code,
            account_label: request.account_label,
            region: request.region,
            type: request.type,
            tier: request.tier,
            prefunded: request.prefunded,
            financial_advisors: request.financial_advisors,
            created_at: at,
            updated_at: at,
          })
          .returningAll()
          .executeTakeFirstOrThrow();
        // As for a tenant added later (tenants.service.ts): a tenant that came to hold balances of its own
        // under the label since the request is left out, its refusal recorded as a settled add.
        const refused = await holdingOwnBalancesNow(
          trx,
          platformCode,
          request.tenants,
          request.account_label,
        );
        for (const tenant of refused) {
          await deleteTenantMembership(trx, platformCode, request.zrn, tenant);
          await insertTenantChange(trx, {
            change_id: newUuid(),
            zrn: request.zrn,
            platform_code: platformCode,
            participant_code: tenant,
            account_label: request.account_label,
            change: 'add',
            accepted_at: request.accepted_at,
            applied_at: at,
            refused_reason: ownBalancesRefusal(tenant, request.account_label),
          });
        }
        await activateAccountMemberships(trx, platformCode, request.zrn, at);
        await markCreationApplied(trx, request.request_id, at);
        return recordAccountNotification(trx, row);
      });
    },

    /**
     * GET /accounts/{zrn}/details. With `participantCode`, the account as that participant sees it: its
     * holder and its tenants in effect are served alike (spec 2.1); a former tenant gets 403 from
     * resolveAccountHolder, and any other participant gets 403 too.
     */
    async details(
      platformCode: string,
      zrn: string,
      options: { participantCode?: string; withPending?: boolean } = {},
    ): Promise<CustomerAccountDetails> {
      const { participantCode, withPending = false } = options;
      // One snapshot: a tenant change the job applies meanwhile moves from the pending list to the tenants,
      // and read on either side of its commit it would be in neither list (or both), which a platform
      // confirming the change (spec 4.2), and the SDK's idempotence check, read as refused.
      return inOneSnapshot(db, async (trx) => {
        const row = await requirePlatformAccount(trx, platformCode, zrn);
        if (participantCode !== undefined) {
          // spec 5.4, as the other lists' participant filters: another platform's participant → 403.
          if (await codeOnOtherPlatform(trx, platformCode, participantCode)) {
            throw forbidden(`participant ${participantCode} belongs to another platform`);
          }
          const holder = await resolveAccountHolder(trx, platformCode, participantCode, row.account_label);
          if (holder.zrn !== zrn) {
            throw forbidden(
              `participant ${participantCode} is neither the holder nor a tenant of account ${zrn}`,
            );
          }
        }
        return accountDetailsOf(trx, row, withPending);
      });
    },

    /**
     * GET /accounts: the platform's balance accounts with the vendor's filters. A request that names a
     * participant with an account label names an account, so a tenant reads the holder's balances there and
     * a former tenant is refused (issue 5); account_owner alone filters literally.
     */
    async listBalanceAccounts(
      platformCode: string,
      query: ListAccountsQuery,
    ): Promise<{ accounts: BalanceAccount[]; page: number; totalPages: number }> {
      const page = pageOf(query);
      // An input fault before the 403 below (wire-contract §9).
      const unknownNetwork = query.asset === undefined ? null : networkAssetProblem('asset', query.asset);
      if (unknownNetwork) throw invalid(unknownNetwork);
      let owner = query.account_owner;
      if (owner !== undefined) {
        // spec 5.4: the listed resource is that participant's accounts; another platform's → 403.
        const named = await findParticipant(db, owner);
        if (named && named.platform_code !== platformCode) {
          throw forbidden(`participant ${owner} belongs to another platform`);
        }
      }
      if (owner !== undefined && query.account_label !== undefined) {
        const acting = await findActingAccount(db, platformCode, owner, query.account_label);
        if (acting) owner = acting.ownerParticipantCode;
      }
      const filter = {
        platformCode,
        accountOwner: owner,
        accountGroup: query.account_group,
        accountLabel: query.account_label,
        accountType: query.account_type,
        // The vendor's Asset values name a network (USDC.ETH); balances are held in the asset without it, as a
        // trade in USDC.ETH moves USDC (probe: such a filter found nothing).
        asset: query.asset === undefined ? undefined : ledgerAsset(query.asset),
      };
      const { rows, count } = await inOneSnapshot(db, (trx) =>
        rowsAndCount(
          page.offset,
          () => listBalanceAccounts(trx, filter, page.offset, page.limit),
          () => countBalanceAccounts(trx, filter),
        ),
      );
      // The vendor's account listing carries no page_size or count.
      const { page: current, total_pages: totalPages } = pageFields(page, count);
      return {
        accounts: rows.map((r) => ({
          asset: r.asset,
          account_owner: r.participant_code,
          account_type: r.account_type,
          account_group: r.account_group,
          account_label: r.account_label,
          balance: toDecimalString(r.balance),
          account_id: r.account_id,
          last_update: r.updated_at.getTime(),
        })),
        page: current,
        totalPages,
      };
    },
  };
}

export type CustomerAccountsService = ReturnType<typeof createCustomerAccountsService>;
