import { sql, type Insertable, type Selectable } from 'kysely';
import type { Executor } from '../../store/database.ts';
import type { TradeState, TradesTable, WithdrawalRequestsTable } from '../../store/tables/trades.tables.ts';
import { countOf, rowsAndCount } from '../paging.ts';

export type TradeRow = Selectable<TradesTable>;
export type WithdrawalRequestRow = Selectable<WithdrawalRequestsTable>;
/** A trade with the withdrawal request that goes with it (convert and withdraw), if any. */
export type TradeWithWithdrawal = TradeRow & { withdrawal_request_id: string | null };

export async function insertTrade(db: Executor, trade: Insertable<TradesTable>): Promise<TradeRow> {
  return db.insertInto('trades').values(trade).returningAll().executeTakeFirstOrThrow();
}

export async function insertWithdrawalRequest(
  db: Executor,
  request: Insertable<WithdrawalRequestsTable>,
): Promise<WithdrawalRequestRow> {
  return db.insertInto('withdrawal_requests').values(request).returningAll().executeTakeFirstOrThrow();
}

function selectTrades(db: Executor) {
  return db
    .selectFrom('trades')
    .leftJoin('withdrawal_requests', 'withdrawal_requests.trade_id', 'trades.trade_id')
    .selectAll('trades')
    .select('withdrawal_requests.withdrawal_request_id');
}

/** Scoped to the calling platform in SQL. */
export function findPlatformTrade(
  db: Executor,
  platformCode: string,
  tradeId: string,
): Promise<TradeWithWithdrawal | undefined> {
  return selectTrades(db)
    .where('trades.platform_code', '=', platformCode)
    .where('trades.trade_id', '=', tradeId)
    .executeTakeFirst();
}

/** Any platform's trade (the operator's read). */
export function findTrade(db: Executor, tradeId: string): Promise<TradeWithWithdrawal | undefined> {
  return selectTrades(db).where('trades.trade_id', '=', tradeId).executeTakeFirst();
}

/** The trade a quote made, if it was executed. */
export function findTradeOfQuote(db: Executor, quoteId: string): Promise<TradeWithWithdrawal | undefined> {
  return selectTrades(db).where('trades.quote_id', '=', quoteId).executeTakeFirst();
}

/** Whether the trade exists at all: tells "another platform's" (403) from "unknown" (404), wire-contract §9. */
export async function tradeExists(db: Executor, tradeId: string): Promise<boolean> {
  const row = await db
    .selectFrom('trades')
    .select('trade_id')
    .where('trade_id', '=', tradeId)
    .executeTakeFirst();
  return row !== undefined;
}

/** Locks the trade for a state change; every transition of one trade serialises here. */
export function lockTrade(db: Executor, tradeId: string): Promise<TradeWithWithdrawal | undefined> {
  return selectTrades(db).where('trades.trade_id', '=', tradeId).forUpdate('trades').executeTakeFirst();
}

/**
 * The trade's state, its row locked, unless another transaction holds it (a step moving it on now): then undefined,
 * at once, rather than waiting behind it.
 */
export async function lockTradeStateIfFree(db: Executor, tradeId: string): Promise<TradeState | undefined> {
  const row = await db
    .selectFrom('trades')
    .select('trade_state')
    .where('trade_id', '=', tradeId)
    .forUpdate()
    .skipLocked()
    .executeTakeFirst();
  return row?.trade_state;
}

export async function updateTradeState(
  db: Executor,
  tradeId: string,
  change: { trade_state: TradeState; updated_at: Date; active_at?: Date; settled_at?: Date },
): Promise<TradeRow> {
  return db
    .updateTable('trades')
    .set(change)
    .where('trade_id', '=', tradeId)
    .returningAll()
    .executeTakeFirstOrThrow();
}

/**
 * Unsettled trades whose next step was due before the given times (accepted: `accepted`, active: `active`),
 * oldest first. A trade's updated_at is when it entered its state: nothing else of a trade changes
 * (trades_guard_update). Through trades_unsettled_updated_id (0036): the unsettled trades alone, in order.
 */
export function findOverdueTrades(
  db: Executor,
  /**
   * An accepted trade is overdue once it entered its state before `accepted` (the range the index reads) and its own
   * `settlement_at` is before `acceptedDue`: a delay configured since it was booked does not make it due (review).
   */
  enteredBefore: { accepted: Date; active: Date; acceptedDue: Date },
  limit: number,
  /** Only those after this one, in the order they are read (a sweep going on where its last run stopped). */
  after: OverdueTrade | null,
): Promise<OverdueTrade[]> {
  return (
    db
      .selectFrom('trades')
      .select(['trade_id', 'trade_state', 'updated_at'])
      .where('trade_state', '<>', 'terminated')
      .$if(after !== null, (query) =>
        query.where((eb) =>
          eb(eb.refTuple('updated_at', 'trade_id'), '>', eb.tuple(after!.updated_at, after!.trade_id)),
        ),
      )
      // The later of the two bounds, as a range the index can scan; the states' own bounds below narrow it.
      .where(
        'updated_at',
        '<',
        enteredBefore.accepted > enteredBefore.active ? enteredBefore.accepted : enteredBefore.active,
      )
      .where((eb) =>
        eb.or([
          eb.and([
            eb('trade_state', '=', 'accepted'),
            eb('updated_at', '<', enteredBefore.accepted),
            eb('settlement_at', '<', enteredBefore.acceptedDue),
          ]),
          eb.and([eb('trade_state', '=', 'active'), eb('updated_at', '<', enteredBefore.active)]),
        ]),
      )
      .orderBy('updated_at')
      .orderBy('trade_id')
      .limit(limit)
      .execute() as Promise<OverdueTrade[]>
  );
}

export interface OverdueTrade {
  trade_id: string;
  trade_state: Exclude<TradeState, 'terminated'>;
  updated_at: Date;
}

export async function markWithdrawalSettled(db: Executor, withdrawalRequestId: string, at: Date) {
  await db
    .updateTable('withdrawal_requests')
    .set({ status: 'settled', settled_at: at })
    .where('withdrawal_request_id', '=', withdrawalRequestId)
    .where('status', '=', 'pending')
    .execute();
}

/**
 * The available balance that a new trade may promise: locks the (participant, label, asset) available
 * balance row, so concurrent executions against one account serialise, then subtracts what unsettled
 * trades already owe from it (balances move only at settlement, wire-contract §7).
 */
export async function lockSpendableBalance(
  db: Executor,
  key: { platformCode: string; participantCode: string; accountLabel: string; asset: string },
): Promise<{ balance: string; promised: string }> {
  const account = await db
    .selectFrom('balance_accounts')
    .select('balance')
    .where('participant_code', '=', key.participantCode)
    .where('account_group', '=', key.platformCode)
    .where('account_label', '=', key.accountLabel)
    .where('account_type', '=', 'available')
    .where('asset', '=', key.asset)
    .forUpdate()
    .executeTakeFirst();
  const open = await unsettledTradesOf(db, key.platformCode, [key.participantCode])
    .select(sql<string>`coalesce(sum(pay_amount), 0)::text`.as('promised'))
    .where('account_label', '=', key.accountLabel)
    .where('pay_asset', '=', key.asset)
    .executeTakeFirstOrThrow();
  return { balance: account?.balance ?? '0', promised: open.promised };
}

/** The unsettled trades that will pay from these participants' balances on the platform. */
function unsettledTradesOf(db: Executor, platformCode: string, ownerParticipantCodes: string[]) {
  return db
    .selectFrom('trades')
    .where('platform_code', '=', platformCode)
    .where('owner_participant_code', 'in', ownerParticipantCodes)
    .where('trade_state', '<>', 'terminated');
}

/**
 * What the participants' unsettled trades will pay at settlement, by owner, account label and asset: the part of
 * each available balance they have promised (lockSpendableBalance's, for all of their balances at once).
 */
export function promisedByAccount(
  db: Executor,
  platformCode: string,
  ownerParticipantCodes: string[],
): Promise<Array<{ owner: string; account_label: string; asset: string; promised: string }>> {
  return unsettledTradesOf(db, platformCode, ownerParticipantCodes)
    .select([
      'owner_participant_code as owner',
      'account_label',
      'pay_asset as asset',
      sql<string>`sum(pay_amount)::text`.as('promised'),
    ])
    .groupBy(['owner_participant_code', 'account_label', 'pay_asset'])
    .execute();
}

export interface TradeFilters {
  clientTradeId?: string;
  /** With clientTradeId: also the trade of this quote (see quoteOfClientTradeId). */
  orQuoteId?: string;
  tradeState?: TradeState;
  accountLabel?: string;
  /** A participant that is a party (owner or counterparty); every code given must be one. */
  partyCodes?: string[];
  underlying?: string;
  /** An asset the trade exchanges: its underlying or its quoted currency. */
  asset?: string;
  /** Epoch ms bounds on transaction_timestamp. */
  after?: number;
  atOrAfter?: number;
  at?: number;
  before?: number;
  atOrBefore?: number;
  /** A filter on a field every trade of ours has null or the platform's value, and the value excludes all. */
  matchesNothing?: boolean;
}

/** One page of the platform's trades, newest first, with the total count. Scoped in SQL. */
export async function listPlatformTrades(
  db: Executor,
  platformCode: string,
  filters: TradeFilters,
  page: { limit: number; offset: number },
): Promise<{ rows: TradeWithWithdrawal[]; count: number }> {
  if (filters.matchesNothing) return { rows: [], count: 0 };
  let query = selectTrades(db).where('trades.platform_code', '=', platformCode);
  const { clientTradeId, orQuoteId } = filters;
  if (clientTradeId !== undefined) {
    query = query.where((eb) =>
      orQuoteId === undefined
        ? eb('trades.client_trade_id', '=', clientTradeId)
        : eb.or([eb('trades.client_trade_id', '=', clientTradeId), eb('trades.quote_id', '=', orQuoteId)]),
    );
  }
  if (filters.tradeState !== undefined) query = query.where('trades.trade_state', '=', filters.tradeState);
  if (filters.accountLabel !== undefined)
    query = query.where('trades.account_label', '=', filters.accountLabel);
  for (const code of filters.partyCodes ?? []) {
    // Vendor: "at least one of the counterparties to a trade in the `parties` array": the owner and the
    // counterparty. A tenant that made the trade is its `trader`, not a party.
    query = query.where((eb) =>
      eb.or([eb('trades.owner_participant_code', '=', code), eb('trades.counterparty_code', '=', code)]),
    );
  }
  if (filters.underlying !== undefined) query = query.where('trades.underlying', '=', filters.underlying);
  const { asset } = filters;
  if (asset !== undefined) {
    query = query.where((eb) =>
      eb.or([eb('trades.underlying', '=', asset), eb('trades.quoted_currency', '=', asset)]),
    );
  }
  if (filters.after !== undefined) query = query.where('trades.transaction_at', '>', new Date(filters.after));
  if (filters.atOrAfter !== undefined)
    query = query.where('trades.transaction_at', '>=', new Date(filters.atOrAfter));
  if (filters.at !== undefined) query = query.where('trades.transaction_at', '=', new Date(filters.at));
  if (filters.before !== undefined)
    query = query.where('trades.transaction_at', '<', new Date(filters.before));
  if (filters.atOrBefore !== undefined)
    query = query.where('trades.transaction_at', '<=', new Date(filters.atOrBefore));

  return rowsAndCount(
    page.offset,
    () =>
      query
        .orderBy('trades.transaction_at', 'desc')
        .orderBy('trades.trade_id', 'desc')
        .limit(page.limit)
        .offset(page.offset)
        .execute(),
    () => countOf(query),
  );
}
