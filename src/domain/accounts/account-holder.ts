import type { Executor } from '../../store/database.ts';
import { invalid } from '../errors.ts';
import { findPlatformParticipant } from '../participants/participants.repository.ts';

/**
 * Who a request acts for when it names a participant together with an account label (funding, quotes,
 * execution). Issue 5: a tenant of a customer account is accepted exactly as its primary holder is, and
 * balances then move on the primary holder's account; a former tenant is refused with 403.
 */
export interface AccountHolder {
  /** The participant named in the request. */
  actingParticipantCode: string;
  /** The participant whose balances move: the primary holder when the actor is a tenant. */
  ownerParticipantCode: string;
  accountLabel: string;
  /** The customer account, when there is one. */
  zrn: string | null;
}

export async function resolveAccountHolder(
  db: Executor,
  platformCode: string,
  participantCode: string,
  accountLabel: string,
  field = 'participant_code',
): Promise<AccountHolder> {
  const participant = await findPlatformParticipant(db, platformCode, participantCode);
  if (!participant || participant.kind !== 'customer') {
    throw invalid(`${field}: participant ${participantCode} not found`);
  }
  if (participant.status !== 'approved') {
    throw invalid(`${field}: participant ${participantCode} is not approved (status ${participant.status})`);
  }
  const own = await db
    .selectFrom('customer_accounts')
    .select('zrn')
    .where('platform_code', '=', platformCode)
    .where('participant_code', '=', participantCode)
    .where('account_label', '=', accountLabel)
    .executeTakeFirst();
  // Tenancy (issue 5) is resolved here too: see the accounts domain.
  return { actingParticipantCode: participantCode, ownerParticipantCode: participantCode, accountLabel, zrn: own?.zrn ?? null };
}
