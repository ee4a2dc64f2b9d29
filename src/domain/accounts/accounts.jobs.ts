import type { CronItem, Task, TaskList } from 'graphile-worker';
import { Type, type Static, type TSchema } from 'typebox';
import { Value } from 'typebox/value';
import { serialCronItem, SWEEP_SCHEDULE, sweepTask } from '../../jobs/cron.ts';
import type { Services } from '../services.ts';

/**
 * Background work of the accounts area (DESIGN §2 "Workers": tenant changes, account creation). Both jobs
 * are enqueued in the transaction that accepts the request and are idempotent: they apply what is still
 * pending and commit it with its notification, so a job that runs twice, or again after a crash, changes
 * nothing more (issue 5).
 */
export const ACCOUNT_TASKS = {
  createCustomerAccount: 'accounts.create_customer_account',
  applyTenantChanges: 'accounts.apply_tenant_changes',
  reviveStalledCreations: 'accounts.revive_stalled_creations',
  reviveStalledTenantChanges: 'accounts.revive_stalled_tenant_changes',
} as const;

/**
 * How long an accepted creation or tenant change may stay pending before the sweep adds its job again: far
 * beyond the usual seconds, so the sweep only ever meets a job that used up its attempts, or lost (a worker down that long
 * is met too, harmlessly: the job is keyed).
 */
export const CREATION_STALLED_AFTER_MS = 10 * 60_000;

export const CreateCustomerAccountJob = Type.Object({
  platform_code: Type.String({ minLength: 1 }),
  request_id: Type.String({ minLength: 1 }),
});
export type CreateCustomerAccountJob = Static<typeof CreateCustomerAccountJob>;

export const ApplyTenantChangesJob = Type.Object({
  platform_code: Type.String({ minLength: 1 }),
  zrn: Type.String({ minLength: 1 }),
});
export type ApplyTenantChangesJob = Static<typeof ApplyTenantChangesJob>;

/** STYLE: job payloads are validated when the job starts; a malformed one fails loudly, not half-applied. */
function checked<T extends TSchema>(schema: T, task: string, payload: unknown): Static<T> {
  if (!Value.Check(schema, payload)) {
    throw new Error(`${task}: invalid payload ${JSON.stringify(payload)}`);
  }
  return payload as Static<T>;
}

export function accountsTaskList(services: Services): TaskList {
  const createCustomerAccount: Task = async (payload) => {
    const job = checked(CreateCustomerAccountJob, ACCOUNT_TASKS.createCustomerAccount, payload);
    await services.customerAccounts.applyCreation(job.platform_code, job.request_id);
  };
  const applyTenantChanges: Task = async (payload) => {
    const job = checked(ApplyTenantChangesJob, ACCOUNT_TASKS.applyTenantChanges, payload);
    await services.tenants.applyPending(job.platform_code, job.zrn);
  };
  const minutes = CREATION_STALLED_AFTER_MS / 60_000;
  const reviveStalledCreations = sweepTask(
    ACCOUNT_TASKS.reviveStalledCreations,
    () => services.customerAccounts.reviveStalledCreations(CREATION_STALLED_AFTER_MS),
    `account creations pending for over ${minutes} min`,
  );
  const reviveStalledTenantChanges = sweepTask(
    ACCOUNT_TASKS.reviveStalledTenantChanges,
    () => services.tenants.reviveStalledChanges(CREATION_STALLED_AFTER_MS),
    `accounts with tenant changes pending for over ${minutes} min`,
  );
  return {
    [ACCOUNT_TASKS.createCustomerAccount]: createCustomerAccount,
    [ACCOUNT_TASKS.applyTenantChanges]: applyTenantChanges,
    [ACCOUNT_TASKS.reviveStalledCreations]: reviveStalledCreations,
    [ACCOUNT_TASKS.reviveStalledTenantChanges]: reviveStalledTenantChanges,
  };
}

export const accountsCronItems: CronItem[] = [
  serialCronItem(ACCOUNT_TASKS.reviveStalledCreations, SWEEP_SCHEDULE),
  serialCronItem(ACCOUNT_TASKS.reviveStalledTenantChanges, SWEEP_SCHEDULE),
];
