import { makeZrn, type Region } from '../../contract/identifiers.ts';
import { newUuid } from '../../lib/ids.ts';
import type { Executor, Trx } from '../../store/database.ts';
import type { DomainDeps } from '../deps.ts';
import { conflict, invalid, pgErrorCode, PG_UNIQUE_VIOLATION } from '../errors.ts';
import { findPlatformParticipant } from '../participants/participants.repository.ts';
import { recordNotification } from '../webhooks/outbox.ts';
import type { CustomerAccountRow } from './customer-accounts.repository.ts';

/** The vendor's customer account shape (CustomerAccountResponse.message). */
export interface CustomerAccountDetails {
  zrn: string;
  participant_code: string;
  platform_code: string;
  prefunded: boolean;
  account_label: string;
  account_group: string;
  type: string;
  tier?: string;
  status: string;
  tenants: string[];
  financial_advisors: string[];
}

export function customerAccountDetails(row: CustomerAccountRow, tenants: string[]): CustomerAccountDetails {
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
    financial_advisors: [],
  };
}

/** wire-contract §5: account notification = the GET /accounts/{zrn}/details object. */
export async function recordAccountNotification(
  trx: Executor,
  details: CustomerAccountDetails,
  timestamp: number,
) {
  await recordNotification(trx, {
    platformCode: details.platform_code,
    payloadType: 'customer_account_status_changed',
    resourceKey: `account:${details.zrn}`,
    payload: { ...details, timestamp },
  });
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

/** Creates the account row and its notification in the caller's transaction. */
export async function insertCustomerAccount(
  trx: Trx,
  input: NewCustomerAccount,
  timestamp: number,
): Promise<CustomerAccountRow> {
  const participant = await findPlatformParticipant(trx, input.platform_code, input.participant_code);
  if (!participant || participant.kind !== 'customer') {
    throw invalid(`participant_code: participant ${input.participant_code} not found for this platform`);
  }
  const zrn = makeZrn(input.region ?? 'us', newUuid());
  try {
    const row = await trx
      .insertInto('customer_accounts')
      .values({
        zrn,
        platform_code: input.platform_code,
        participant_code: input.participant_code,
        account_label: input.account_label ?? 'general',
        region: input.region ?? 'us',
        type: input.type ?? 'individual',
        tier: input.tier ?? null,
        prefunded: input.prefunded ?? true,
      })
      .returningAll()
      .executeTakeFirstOrThrow();
    await recordAccountNotification(trx, customerAccountDetails(row, []), timestamp);
    return row;
  } catch (error) {
    if (pgErrorCode(error) === PG_UNIQUE_VIOLATION) {
      throw conflict(
        `customer account for ${input.participant_code} with label ${input.account_label ?? 'general'} already exists`,
      );
    }
    throw error;
  }
}

export function createCustomerAccountsService(deps: DomainDeps) {
  return {
    /** Operator API: synchronous creation (DESIGN §3). */
    async create(input: NewCustomerAccount): Promise<CustomerAccountDetails> {
      const row = await deps.db
        .transaction()
        .execute((trx) => insertCustomerAccount(trx, input, deps.clock.now()));
      return customerAccountDetails(row, []);
    },
  };
}

export type CustomerAccountsService = ReturnType<typeof createCustomerAccountsService>;
