import { REVIVE_BATCH } from '../../jobs/cron.ts';
import { newUuid } from '../../lib/ids.ts';
import { enqueueJob } from '../../jobs/enqueue.ts';
import type { Executor, Trx } from '../../store/database.ts';
import type { DomainDeps } from '../deps.ts';
import { conflict, forbidden, invalid, notFound } from '../errors.ts';
import { codeOnOtherPlatform, findPlatformParticipant } from '../participants/participants.repository.ts';
import { ACCOUNT_TASKS } from './accounts.jobs.ts';
import {
  activateMembership,
  deleteTenantMembership,
  findMembership,
  findPlatformAccount,
  insertMemberships,
  type CustomerAccountRow,
} from './customer-accounts.repository.ts';
import {
  holdingOwnBalancesNow,
  membershipConflict,
  ownBalancesRefusal,
  recordAccountNotification,
  refuseTenantsWithOwnBalances,
  requirePlatformAccount,
  uniqueViolationToConflict,
} from './customer-accounts.service.ts';
import {
  accountsWithChangesPendingSince,
  insertTenantChange,
  listPendingChanges,
  markChangeApplied,
  markChangeRefused,
  oldestPendingChange,
  type TenantChangeRow,
} from './tenants.repository.ts';

/**
 * Tenants of customer accounts (spec 2.1, 3.2, 4.1, 4.2). Adding and removing are accepted synchronously,
 * where every fact is known (validation, ownership, existence, business rules), and applied by a job: the
 * 202 means accepted, not in effect (spec 3.2). The job refuses the one change whose rule can stop holding
 * meanwhile (see `refusal`). Acceptances and applications of one account serialise on a
 * lock of the account row, so changes take effect in acceptance order (tenant_changes.seq).
 */
export function createTenantsService(deps: DomainDeps) {
  const { db, clock } = deps;

  async function enqueueApply(
    trx: Executor,
    account: Pick<CustomerAccountRow, 'platform_code' | 'zrn'>,
  ): Promise<void> {
    // One job key per account: a burst of changes wakes one job that applies them all in order; a change
    // accepted while that job runs gets a new job (graphile-worker clears the key of a running job).
    await enqueueJob(
      trx,
      ACCOUNT_TASKS.applyTenantChanges,
      { platform_code: account.platform_code, zrn: account.zrn },
      { jobKey: `${ACCOUNT_TASKS.applyTenantChanges}:${account.zrn}` },
    );
  }

  /** Applies the oldest pending change of the account, with its notification; false when none is left. */
  async function applyOldest(platformCode: string, zrn: string): Promise<boolean> {
    return db.transaction().execute(async (trx) => {
      const account = await findPlatformAccount(trx, platformCode, zrn, true);
      if (!account) return false;
      const change = await oldestPendingChange(trx, platformCode, zrn);
      if (!change) return false;
      const at = new Date(clock.now());
      const refused = await refusal(trx, change);
      if (refused !== null) {
        // Settled without taking effect; a refused add leaves no tenancy, pending or not.
        if (change.change === 'add')
          await deleteTenantMembership(trx, platformCode, zrn, change.participant_code);
        await markChangeRefused(trx, change.change_id, at, refused);
      } else {
        if (change.change === 'add') {
          await activateMembership(trx, platformCode, zrn, change.participant_code, at);
        } else {
          await deleteTenantMembership(trx, platformCode, zrn, change.participant_code);
        }
        await markChangeApplied(trx, change.change_id, at);
      }
      // wire-contract §5: the account notification, when a tenant change is settled, commits with it (spec
      // 4.2: platforms confirm the tenant set by it, so they learn of a refusal the same way).
      await recordAccountNotification(trx, account);
      return true;
    });
  }

  /**
   * Why an accepted change cannot take effect, or null. An add whose participant came to hold balances of its
   * own under the label while the add was pending (until it takes effect, requests naming the participant
   * with the label act for the participant itself): as a tenant it could not reach them, which is why such an
   * add is refused when requested (409). A removal that followed a refused add: there is no tenancy to end.
   * Only a tenancy in effect is one: the pending one of a later add of the participant (accepted once the
   * refused add was settled, behind this removal) is that add's to apply, not this removal's to end.
   */
  async function refusal(trx: Trx, change: TenantChangeRow): Promise<string | null> {
    const { platform_code: platformCode, participant_code: participant, account_label: label } = change;
    if (change.change === 'add') {
      const holding = await holdingOwnBalancesNow(trx, platformCode, [participant], label);
      return holding.length === 0 ? null : ownBalancesRefusal(participant, label);
    }
    const membership = await findMembership(trx, platformCode, participant, label);
    return membership?.zrn === change.zrn && membership.role === 'tenant' && membership.effective_at
      ? null
      : `participant ${participant} is not a tenant of account ${change.zrn}: its addition was refused`;
  }

  return {
    /** POST /accounts/{zrn}/tenants (spec 4.1). */
    async add(platformCode: string, zrn: string, participantCode: string): Promise<void> {
      try {
        await db.transaction().execute(async (trx) => {
          // wire-contract §9: ownership (403) and existence (404) before the business rules.
          const account = await requirePlatformAccount(trx, platformCode, zrn, true);
          const participant = await findPlatformParticipant(trx, platformCode, participantCode);
          // wire-contract §9: a participant named in the body that is not the caller's is unknown (400).
          if (!participant || participant.kind !== 'customer') {
            throw invalid(`participant_code: participant ${participantCode} not found`);
          }
          // spec 4.1: the participant must already be onboarded.
          if (participant.status !== 'approved') {
            throw invalid(
              `participant_code: participant ${participantCode} is not onboarded (status ${participant.status})`,
            );
          }
          // spec 2.1: the tenant must differ from the primary account holder.
          if (participantCode === account.participant_code) {
            throw invalid(`participant_code: participant ${participantCode} is the primary account holder`);
          }
          const membership = await findMembership(trx, platformCode, participantCode, account.account_label);
          if (membership?.zrn === zrn && membership.role === 'tenant') {
            // One change of a participant at a time: with its removal queued, the add must wait until that has
            // taken effect, and the answer says so rather than describe a tenancy that is about to end.
            const removing = (await listPendingChanges(trx, platformCode, zrn)).some(
              (c) => c.participant_code === participantCode && c.change === 'remove',
            );
            const state = membership.effective_at
              ? `participant ${participantCode} is already a tenant of account ${zrn}`
              : `adding participant ${participantCode} to account ${zrn} is already pending`;
            throw conflict(
              removing
                ? `${state}, and its removal is pending: add it again once the removal has taken effect`
                : state,
            );
          }
          if (membership) throw membershipConflict('participant_code', membership, account.account_label);
          await refuseTenantsWithOwnBalances(
            trx,
            platformCode,
            'participant_code',
            [participantCode],
            account.account_label,
          );
          // The membership's primary key and tenant_changes_one_pending refuse a concurrent duplicate.
          await insertMemberships(trx, [
            {
              platform_code: platformCode,
              participant_code: participantCode,
              account_label: account.account_label,
              zrn,
              role: 'tenant',
              effective_at: null,
            },
          ]);
          await insertTenantChange(trx, {
            change_id: newUuid(),
            zrn,
            platform_code: platformCode,
            participant_code: participantCode,
            account_label: account.account_label,
            change: 'add',
            accepted_at: new Date(clock.now()),
          });
          await enqueueApply(trx, account);
        });
      } catch (error) {
        throw uniqueViolationToConflict(
          error,
          `adding participant ${participantCode} to account ${zrn} conflicts with a change accepted at the same time`,
        );
      }
    },

    /** DELETE /accounts/{zrn}/tenants/{tenant} (spec 4.2). */
    async remove(platformCode: string, zrn: string, tenant: string): Promise<void> {
      try {
        await db.transaction().execute(async (trx) => {
          const account = await requirePlatformAccount(trx, platformCode, zrn, true);
          if (tenant === account.participant_code) {
            throw invalid(`tenant: participant ${tenant} is the primary account holder`);
          }
          // A tenant in effect or one whose add is still pending (it is removed after the add, in order).
          const membership = await findMembership(trx, platformCode, tenant, account.account_label);
          if (!membership || membership.zrn !== zrn || membership.role !== 'tenant') {
            // wire-contract §9: a resource named in the path that belongs to another platform → 403.
            if (await codeOnOtherPlatform(trx, platformCode, tenant)) {
              throw forbidden(`tenant: participant ${tenant} belongs to another platform`);
            }
            throw notFound(`participant ${tenant} is not a tenant of account ${zrn}`);
          }
          const pending = await listPendingChanges(trx, platformCode, zrn);
          if (pending.some((c) => c.participant_code === tenant && c.change === 'remove')) {
            throw conflict(`removing participant ${tenant} from account ${zrn} is already pending`);
          }
          await insertTenantChange(trx, {
            change_id: newUuid(),
            zrn,
            platform_code: platformCode,
            participant_code: tenant,
            account_label: account.account_label,
            change: 'remove',
            accepted_at: new Date(clock.now()),
          });
          await enqueueApply(trx, account);
        });
      } catch (error) {
        throw uniqueViolationToConflict(
          error,
          `removing participant ${tenant} from account ${zrn} conflicts with a change accepted at the same time`,
        );
      }
    },

    /**
     * The job: applies the account's pending changes one by one, oldest first, each in its own transaction
     * with its notification. Idempotent: what is applied is no longer pending, so a second run (or a run
     * after a crash, which rolled back the unfinished change) applies each change exactly once.
     */
    async applyPending(platformCode: string, zrn: string): Promise<number> {
      let applied = 0;
      while (await applyOldest(platformCode, zrn)) applied++;
      return applied;
    },

    /**
     * The recurring sweep (accounts.jobs.ts): an account with a change pending for more than `stalledAfterMs`
     * has its job added again, with its attempts afresh. A job that used up its attempts left the change
     * pending until the account's next change woke another (review). Keyed, the job replaces one still
     * waiting. Returns how many accounts were given their job again.
     */
    async reviveStalledChanges(stalledAfterMs: number): Promise<number> {
      const stalled = await accountsWithChangesPendingSince(
        db,
        new Date(clock.now() - stalledAfterMs),
        REVIVE_BATCH,
      );
      for (const account of stalled) await enqueueApply(db, account);
      return stalled.length;
    },
  };
}

export type TenantsService = ReturnType<typeof createTenantsService>;
