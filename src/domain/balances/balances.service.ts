import type { BALANCE_ACCOUNT_TYPES } from '../../contract/wire-values.ts';
import type { HeldBalance } from '../../contract/admin.schemas.ts';
import { ACCOUNT_LABEL_FORM, isAccountLabel, MAX_ACCOUNT_LABEL_LENGTH } from '../../contract/responses.ts';
import { AMOUNT_DECIMALS } from '../../contract/quotes.schemas.ts';
import type { AccountBalanceChanged } from '../../contract/webhook-payloads.ts';
import { Dec, Exact, toDecimalString } from '../../lib/decimal.ts';
import { newUuid } from '../../lib/ids.ts';
import { inOneSnapshot, type Trx } from '../../store/database.ts';
import { findActingAccount } from '../accounts/account-holder.ts';
import { tenanciesInEffect } from '../accounts/customer-accounts.repository.ts';
import type { DomainDeps } from '../deps.ts';
import { DomainError, invalid, notFound } from '../errors.ts';
import { lockParticipantFunding } from '../funding/funding.repository.ts';
import { findParticipant } from '../participants/participants.repository.ts';
import { lockSpendableBalance, promisedByAccount } from '../trades/trades.repository.ts';
import { recordNotification } from '../webhooks/outbox.ts';

/**
 * The balance ledger: every change is a movement on a (participant, group, label, type, asset) account,
 * applied under a row lock in the caller's transaction together with its account_balance.changed
 * notification (wire-contract §5: for available and collateral accounts only).
 */
export type AccountType = (typeof BALANCE_ACCOUNT_TYPES)[number];
const NOTIFIED_TYPES: ReadonlySet<string> = new Set(['available', 'collateral']);

export interface MovementInput {
  platformCode: string;
  participantCode: string;
  accountLabel: string;
  accountType?: AccountType;
  asset: string;
  /** Decimal string; negative debits. */
  change: string;
  movementType: string;
  /** Refuse a debit that would take the balance below zero. */
  requireSufficient?: boolean;
  /** The request field an insufficient balance is reported against ("amount: insufficient balance…"). */
  sufficiencyField?: string;
}

export interface AppliedMovement {
  account_id: string;
  movement_id: string;
  balance: string;
}

export async function applyMovements(
  trx: Trx,
  run: { runId: string; runType: string; timestamp: number },
  movements: MovementInput[],
): Promise<AppliedMovement[]> {
  const applied: AppliedMovement[] = [];
  for (const m of movements) {
    const accountType = m.accountType ?? 'available';
    // Create the balance row if needed, then lock it: concurrent movements on one account serialise here.
    const created = await trx
      .insertInto('balance_accounts')
      .values({
        account_id: newUuid(),
        platform_code: m.platformCode,
        participant_code: m.participantCode,
        account_group: m.platformCode,
        account_label: m.accountLabel,
        account_type: accountType,
        asset: m.asset,
        // Not the database's now: the first movement's time, which the next is stamped after (below).
        updated_at: new Date(run.timestamp),
      })
      .onConflict((oc) =>
        oc
          .columns(['participant_code', 'account_group', 'account_label', 'account_type', 'asset'])
          .doNothing(),
      )
      .returning('account_id')
      .executeTakeFirst();
    const account = await trx
      .selectFrom('balance_accounts')
      .selectAll()
      .where('participant_code', '=', m.participantCode)
      .where('account_group', '=', m.platformCode)
      .where('account_label', '=', m.accountLabel)
      .where('account_type', '=', accountType)
      .where('asset', '=', m.asset)
      .forUpdate()
      .executeTakeFirstOrThrow();
    const next = new Exact(account.balance).plus(m.change);
    if (m.requireSufficient && next.isNegative()) {
      const field = m.sufficiencyField ? `${m.sufficiencyField}: ` : '';
      // The type named when it is not the usual one: "USD general has 1000" for a collateral debit named the
      // available balance's label, which holds more (probe).
      const type = accountType === 'available' ? '' : ` ${accountType}`;
      throw invalid(
        `${field}insufficient balance: ${m.asset} ${m.accountLabel}${type} has ${toDecimalString(account.balance)}`,
      );
    }
    // After the account's last movement, by a ms at least: a run's time is read before it waits here for the row,
    // so concurrent runs (trades settling on one account) took it in another order than they commit, and the
    // account's notifications, in commit order, went back in time; a receiver that keeps the newest by
    // `timestamp` kept a balance that was not the last (probe). So did another instance's clock behind. Equal
    // times left the newest undecided (review).
    const after = created ? -Infinity : account.updated_at.getTime() + 1;
    const timestamp = new Date(Math.max(run.timestamp, after));
    await trx
      .updateTable('balance_accounts')
      .set({ balance: next.toFixed(), updated_at: timestamp })
      .where('account_id', '=', account.account_id)
      .execute();
    const movementId = newUuid();
    await trx
      .insertInto('balance_movements')
      .values({
        movement_id: movementId,
        account_id: account.account_id,
        run_id: run.runId,
        run_type: run.runType,
        movement_type: m.movementType,
        change: new Dec(m.change).toFixed(),
        movement_timestamp: timestamp,
      })
      .execute();
    if (NOTIFIED_TYPES.has(accountType)) {
      await recordNotification(trx, {
        platformCode: m.platformCode,
        payloadType: 'account_balance.changed',
        resourceKey: `balance:${account.account_id}`,
        payload: {
          participant_code: m.participantCode,
          account_group: m.platformCode,
          account_label: m.accountLabel,
          account_type: accountType,
          asset: m.asset,
          balance: toDecimalString(next),
          run_id: run.runId,
          run_type: run.runType,
          timestamp: timestamp.getTime(),
          movements: [
            {
              account_id: account.account_id,
              change: toDecimalString(m.change),
              movement_id: movementId,
              movement_timestamp: timestamp.getTime(),
              movement_type: m.movementType,
            },
          ],
        } satisfies AccountBalanceChanged,
      });
    }
    applied.push({ account_id: account.account_id, movement_id: movementId, balance: toDecimalString(next) });
  }
  return applied;
}

export function createBalancesService(deps: DomainDeps) {
  return {
    /**
     * `GET /admin/balances`: the balances the participant's requests act on, each with what unsettled trades have
     * promised of it; by label, then asset, then type. Under a label where it is a tenant in effect, those are the
     * holder's, as `adjust` and the public `GET /accounts` take them (review: a tenant was shown nothing, where a
     * debit named by it moved its holder's balance). In one snapshot: a settlement between the reads made more
     * look free than was.
     */
    async list(query: {
      participant_code: string;
      account_label?: string;
      asset?: string;
    }): Promise<HeldBalance[]> {
      const participant = await findParticipant(deps.db, query.participant_code);
      if (!participant) throw notFound(`participant ${query.participant_code} not found`);
      const { platform_code: platformCode, participant_code: self } = participant;
      return inOneSnapshot(deps.db, async (trx) => {
        const tenancies = await tenanciesInEffect(trx, platformCode, self, query.account_label);
        const tenantLabels = tenancies.map((t) => t.account_label);
        const [rows, promised] = await Promise.all([
          trx
            .selectFrom('balance_accounts')
            .selectAll()
            .where('account_group', '=', platformCode)
            // Its own balances but under the labels where it acts for a holder, and those holders' under those.
            .where((eb) =>
              eb.or([
                eb.and([
                  eb('participant_code', '=', self),
                  ...(tenantLabels.length > 0 ? [eb('account_label', 'not in', tenantLabels)] : []),
                ]),
                ...tenancies.map((t) =>
                  eb.and([eb('participant_code', '=', t.holder), eb('account_label', '=', t.account_label)]),
                ),
              ]),
            )
            .$if(query.account_label !== undefined, (q) =>
              q.where('account_label', '=', query.account_label!),
            )
            .$if(query.asset !== undefined, (q) => q.where('asset', '=', query.asset!))
            .execute(),
          promisedByAccount(trx, platformCode, [self, ...tenancies.map((t) => t.holder)]),
        ]);
        const key = (owner: string, label: string, asset: string) => `${owner}\n${label}\n${asset}`;
        const promisedOf = new Map(promised.map((p) => [key(p.owner, p.account_label, p.asset), p.promised]));
        // Ordered here, by label, asset and type as JavaScript compares text (UTF-16 code units), whatever the
        // database's collation.
        const ordered = (a: (typeof rows)[number], b: (typeof rows)[number]) =>
          compareKeys([a.account_label, a.asset, a.account_type], [b.account_label, b.asset, b.account_type]);
        return rows.sort(ordered).map((row): HeldBalance => ({
          participant_code: row.participant_code,
          account_group: row.account_group,
          account_label: row.account_label,
          account_type: row.account_type,
          asset: row.asset,
          balance: toDecimalString(row.balance),
          promised: toDecimalString(
            row.account_type === 'available'
              ? (promisedOf.get(key(row.participant_code, row.account_label, row.asset)) ?? '0')
              : '0',
          ),
          account_id: row.account_id,
          updated_at: row.updated_at.getTime(),
        }));
      });
    },

    /**
     * Operator credit or debit (DESIGN §3); a debit below zero is refused. Like every request that names a
     * participant with an account label, it moves the account that pair names: a tenant's is its holder's
     * (issue 5). It credited the tenant's own row under the label instead, which no request of the platform
     * could reach, and which the tenancy had been refused for.
     */
    async adjust(input: {
      platform_code?: string;
      participant_code: string;
      account_label: string;
      asset: string;
      amount: string;
      account_type?: AccountType;
    }) {
      const problems: string[] = [];
      const participant = await findParticipant(deps.db, input.participant_code);
      if (!participant || (input.platform_code && participant.platform_code !== input.platform_code)) {
        problems.push(`participant_code: participant ${input.participant_code} not found`);
      }
      const amount = new Dec(input.amount);
      if (amount.isZero()) problems.push('amount: must not be zero');
      // Quotes, trades and fees carry AMOUNT_DECIMALS places: a finer balance could never be moved to its
      // last digit.
      if (amount.decimalPlaces() > AMOUNT_DECIMALS)
        problems.push(`amount: must have at most ${AMOUNT_DECIMALS} decimal places`);
      if (!participant || problems.length > 0) throw invalid(...problems);
      const runId = newUuid();
      const [applied, ownerCode] = await deps.db.transaction().execute(async (trx) => {
        // First, as a deposit does: a tenancy about to take effect checks the participant's own balances
        // under this same lock (holdingOwnBalancesNow), so it either sees this movement or is seen by it.
        await lockParticipantFunding(trx, participant.participant_code);
        const account = await findActingAccount(
          trx,
          participant.platform_code,
          participant.participant_code,
          input.account_label,
        ).catch((err: unknown) => {
          // A former tenant: what it names is no account any more (403 on the platform's side).
          if (err instanceof DomainError) throw invalid(`participant_code: ${err.message}`);
          throw err;
        });
        const owner = account?.ownerParticipantCode ?? participant.participant_code;
        const accountType = input.account_type ?? 'available';
        // A label the public API refuses (a space at an end, a character that prints as nothing, more than 40
        // characters) only reaches a balance already held under it: a new one there would be money no request of
        // the platform could move (probe: seven USD accounts that all printed as "general").
        // A customer account opened under it before (with no balance in this asset yet) is within reach too (review).
        if (!isAccountLabel(input.account_label) && !account?.zrn) {
          const held = await trx
            .selectFrom('balance_accounts')
            .select('account_id')
            .where('participant_code', '=', owner)
            .where('account_group', '=', participant.platform_code)
            .where('account_label', '=', input.account_label)
            .where('account_type', '=', accountType)
            .where('asset', '=', input.asset)
            .executeTakeFirst();
          if (!held)
            throw invalid(
              `account_label: is not in the expected form (${ACCOUNT_LABEL_FORM}, at most ${MAX_ACCOUNT_LABEL_LENGTH} characters): only a balance already held under such a label can be adjusted`,
            );
        }
        if (amount.isNegative() && accountType === 'available') {
          // Unsettled trades pay from the available balance at settlement (wire-contract §7): a debit may
          // take only what they have not promised, or they could never settle.
          const { balance, promised } = await lockSpendableBalance(trx, {
            platformCode: participant.platform_code,
            participantCode: owner,
            accountLabel: input.account_label,
            asset: input.asset,
          });
          const free = new Exact(balance).minus(promised);
          if (free.plus(amount).isNegative()) {
            throw invalid(
              `amount: insufficient balance: ${input.asset} ${input.account_label} has ` +
                `${toDecimalString(balance)}, of which ${toDecimalString(promised)} is promised to unsettled trades`,
            );
          }
        }
        const movements = await applyMovements(
          trx,
          { runId, runType: 'operator_adjustment', timestamp: deps.clock.now() },
          [
            {
              platformCode: participant.platform_code,
              participantCode: owner,
              accountLabel: input.account_label,
              accountType: input.account_type,
              asset: input.asset,
              change: input.amount,
              movementType: amount.isNegative() ? 'withdrawal' : 'deposit',
              requireSufficient: true,
              sufficiencyField: 'amount',
            },
          ],
        );
        return [movements[0], owner] as const;
      });
      return {
        participant_code: ownerCode,
        account_group: participant.platform_code,
        account_label: input.account_label,
        account_type: input.account_type ?? 'available',
        asset: input.asset,
        balance: applied!.balance,
        account_id: applied!.account_id,
        movement_id: applied!.movement_id,
        run_id: runId,
      };
    },
  };
}

export type BalancesService = ReturnType<typeof createBalancesService>;

/** Orders by the first key that differs, as JavaScript compares text. */
function compareKeys(a: string[], b: string[]): number {
  for (let i = 0; i < a.length; i += 1) if (a[i] !== b[i]) return a[i]! < b[i]! ? -1 : 1;
  return 0;
}
