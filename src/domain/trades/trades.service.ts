import { REVIVE_BATCH } from '../../jobs/cron.ts';
import type { AdminListTradesQuery, BookTradeBody, ListTradesQuery } from '../../contract/trades.schemas.ts';
import { TRADES_DEFAULT_PAGE_SIZE } from '../../contract/trades.schemas.ts';
import { enqueueJob, type EnqueueOptions } from '../../jobs/enqueue.ts';
import { Dec, Exact, toDecimalString } from '../../lib/decimal.ts';
import { splitDecimal, wholeBound } from '../../lib/range-bound.ts';
import { newUuid } from '../../lib/ids.ts';
import { inOneSnapshot, type Executor, type Trx } from '../../store/database.ts';
import type { TradeSide, TradeSource } from '../../store/tables/trades.tables.ts';
import { resolveAccountHolder, type AccountHolder } from '../accounts/account-holder.ts';
import { applyMovements, type MovementInput } from '../balances/balances.service.ts';
import type { DomainDeps } from '../deps.ts';
import { conflict, forbidden, invalid, notFound, pgErrorCode, PG_UNIQUE_VIOLATION } from '../errors.ts';
import { codeOnOtherPlatform } from '../participants/participants.repository.ts';
import { findPlatform } from '../platforms/platforms.repository.ts';
import { MAX_AMOUNT_LENGTH } from '../../contract/quotes.schemas.ts';
import { networkAssetProblem } from '../quotes/network-assets.ts';
import { isQuoteOf } from '../quotes/quotes.repository.ts';
import { ledgerAsset, notionalAt } from '../quotes/pricing.ts';
import { recordNotification } from '../webhooks/outbox.ts';
import { adminTradeView, tradeNotification, tradeView } from './trade-view.ts';
import {
  findPlatformTrade,
  insertTrade,
  insertWithdrawalRequest,
  listPlatformTrades,
  lockSpendableBalance,
  findOverdueTrades,
  findTrade,
  findTradeOfQuote,
  type OverdueTrade,
  lockTrade,
  lockTradeStateIfFree,
  markWithdrawalSettled,
  tradeExists,
  updateTradeState,
  type TradeFilters,
  type TradeWithWithdrawal,
} from './trades.repository.ts';
import { pageFields, pageOf } from '../paging.ts';
import type { TradeState } from '../../contract/wire-values.ts';

/**
 * Trades: booking (from an executed quote or by the operator), the settlement state machine
 * accepted → active → terminated (spec 3.1, wire-contract §7), and reading them (spec 4.6).
 *
 * Balances move only at settlement (terminated), in the transaction that changes the state and records
 * the notifications. Executing checks that the balance not yet promised to unsettled trades covers the new
 * one, under the balance row's lock, so concurrent executions cannot promise the same funds twice.
 */

/** graphile-worker task that moves a trade to its next state when its time comes (trades.jobs.ts). */
export const SETTLE_TASK = 'trades.settle';
/** The recurring sweep that gives a trade whose settlement job used up its attempts its job again. */
export const REVIVE_SETTLEMENTS_TASK = 'trades.revive_stalled_settlements';
/**
 * The counterparty of every quote-based trade: the house liquidity provider. External liquidity is out
 * of scope (DESIGN §1), so it has no ledger account; only the participant's balances move.
 */
export const LIQUIDITY_PROVIDER_CODE = 'SVCLQD';
export const DEFAULT_ACCOUNT_LABEL = 'general';

const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
export const isUuid = (value: string) => UUID_RE.test(value);

/**
 * The quote whose trade a client_trade_id filter also matches: the value, when it is a UUID. An executed
 * quote's trade carries the quote_id as its client_trade_id in its canonical lower-case form (wire-contract
 * §7, spec 7.2), while execute takes the quote_id in any case (a UUID is case-insensitive, and some platforms
 * store them upper-case): a platform looking its trade up with the id as it sent it must find it, or spec
 * 7.2's recovery reads "expired" and quotes and trades again. Only a quote's trade is matched so; any other
 * trade's client_trade_id (an operator's) still matches exactly.
 */
function quoteOfClientTradeId(value: string | undefined): string | undefined {
  return value !== undefined && isUuid(value) ? value : undefined;
}

export interface SettleJobPayload {
  trade_id: string;
  /** The state the job moves the trade out of; if it has moved on already, the job does nothing. */
  from: Exclude<TradeState, 'terminated'>;
}

/** Whose account a trade acts on (the part of `AccountHolder` trades need). */
export type TradingHolder = Pick<
  AccountHolder,
  'actingParticipantCode' | 'ownerParticipantCode' | 'accountLabel' | 'zrn'
>;

export interface NewTrade {
  platformCode: string;
  holder: TradingHolder;
  source: TradeSource;
  netSettlement: boolean;
  clientTradeId: string;
  quoteId: string | null;
  side: TradeSide;
  underlying: string;
  quotedCurrency: string;
  price: string;
  quantity: string;
  totalNotional: string;
  assetCostNotional: string;
  spreadBps: string | null;
  spreadNotional: string | null;
  networkFeeNotional: string | null;
  networkFeeQuantity: string | null;
  comment: string | null;
  withdrawal: { address: string; destinationTag: string | null; noDestinationTag: boolean | null } | null;
  /** The request field a shortfall is reported on ("<field>: insufficient balance …"). */
  fundsField: string;
  /**
   * When the trade is made (epoch ms): a quote's execution, as its claim found it unexpired. Default: now, read
   * once the account's balance is locked.
   */
  at?: number;
}

/**
 * The participant a request acts for: the named customer (tenants act like the primary holder, issue 5),
 * or, when none is named, the platform itself (DESIGN §3: a platform is a participant with its own code).
 */
export async function resolveTradingHolder(
  db: Executor,
  platformCode: string,
  participantCode: string | undefined,
  accountLabel: string | undefined,
  /** The request's field a refusal names (wire-contract §3: `<field>: <problem>`). */
  field = 'participant_code',
): Promise<TradingHolder> {
  const label = accountLabel ?? DEFAULT_ACCOUNT_LABEL;
  if (participantCode === undefined || participantCode === platformCode) {
    return {
      actingParticipantCode: platformCode,
      ownerParticipantCode: platformCode,
      accountLabel: label,
      zrn: null,
    };
  }
  return resolveAccountHolder(db, platformCode, participantCode, label, field);
}

function legs(
  trade: Pick<NewTrade, 'side' | 'underlying' | 'quotedCurrency' | 'quantity' | 'totalNotional'>,
) {
  const underlying = { asset: ledgerAsset(trade.underlying), amount: trade.quantity };
  const quoted = { asset: trade.quotedCurrency, amount: trade.totalNotional };
  return trade.side === 'buy' ? { pay: quoted, receive: underlying } : { pay: underlying, receive: quoted };
}

async function recordTradeStatus(trx: Executor, row: TradeWithWithdrawal, timestamp: number) {
  // spec 3.1, 6: net settlement (allocation) trades emit nothing.
  if (row.net_settlement) return;
  await recordNotification(trx, {
    platformCode: row.platform_code,
    payloadType: 'trade_status_changed',
    resourceKey: `trade:${row.trade_id}`,
    payload: tradeNotification(row, timestamp),
  });
}

/**
 * When the settlement timer moves a trade on: an accepted trade at the `settlement_timestamp` it was booked with
 * (a delay configured since does not move it: review), an active one the configured delay after it went active.
 */
function nextStepDue(deps: DomainDeps, row: TradeWithWithdrawal): number {
  return row.trade_state === 'accepted'
    ? row.settlement_at.getTime()
    : row.updated_at.getTime() + deps.config.settlement.terminateAfterMs;
}

async function scheduleNextStep(deps: DomainDeps, trx: Executor, row: TradeWithWithdrawal) {
  if (row.trade_state === 'terminated') return;
  await enqueueSettleStep(
    trx,
    { trade_id: row.trade_id, from: row.trade_state },
    { runAt: new Date(nextStepDue(deps, row)) },
  );
}

/** One pending settlement job per trade: an operator's advance replaces the timer it overtakes. */
function enqueueSettleStep(
  db: Executor,
  payload: SettleJobPayload,
  when: Pick<EnqueueOptions, 'runAt' | 'delayMs'>,
) {
  return enqueueJob(db, SETTLE_TASK, payload, { ...when, jobKey: `trade-settle:${payload.trade_id}` });
}

/**
 * Books a trade in the caller's transaction: checks the funds, inserts it (`accepted`), its withdrawal
 * request for convert and withdraw, its `accepted` notification, and the job that settles it.
 */
export async function bookTrade(deps: DomainDeps, trx: Trx, input: NewTrade): Promise<TradeWithWithdrawal> {
  const { pay, receive } = legs(input);
  const funds = await lockSpendableBalance(trx, {
    platformCode: input.platformCode,
    participantCode: input.holder.ownerParticipantCode,
    accountLabel: input.holder.accountLabel,
    asset: pay.asset,
  });
  const spendable = new Exact(funds.balance).minus(funds.promised);
  if (spendable.lessThan(pay.amount)) {
    throw invalid(
      `${input.fundsField}: insufficient balance: ${pay.asset} on account ${input.holder.accountLabel} of ` +
        `${input.holder.ownerParticipantCode} has ${toDecimalString(Dec.max(spendable, 0))} not yet promised ` +
        `to unsettled trades, the trade needs ${toDecimalString(pay.amount)}`,
    );
  }
  const now = input.at ?? deps.clock.now();
  const at = new Date(now);
  const tradeId = newUuid();
  let trade;
  try {
    trade = await insertTrade(trx, {
      trade_id: tradeId,
      platform_code: input.platformCode,
      client_trade_id: input.clientTradeId,
      quote_id: input.quoteId,
      source: input.source,
      net_settlement: input.netSettlement,
      participant_code: input.holder.actingParticipantCode,
      owner_participant_code: input.holder.ownerParticipantCode,
      account_label: input.holder.accountLabel,
      zrn: input.holder.zrn,
      counterparty_code: LIQUIDITY_PROVIDER_CODE,
      side: input.side,
      underlying: input.underlying,
      quoted_currency: input.quotedCurrency,
      trade_price: input.price,
      trade_quantity: input.quantity,
      total_notional: input.totalNotional,
      asset_cost_notional: input.assetCostNotional,
      spread_bps: input.spreadBps,
      spread_notional: input.spreadNotional,
      network_fee_notional: input.networkFeeNotional,
      network_fee_quantity: input.networkFeeQuantity,
      pay_asset: pay.asset,
      pay_amount: pay.amount,
      receive_asset: receive.asset,
      receive_amount: receive.amount,
      comment: input.comment,
      trade_state: 'accepted',
      transaction_at: at,
      accepted_at: at,
      settlement_at: new Date(now + deps.config.settlement.activeAfterMs),
      updated_at: at,
    });
  } catch (error) {
    if (pgErrorCode(error) === PG_UNIQUE_VIOLATION) {
      throw conflict(`client_trade_id: a trade with client_trade_id ${input.clientTradeId} already exists`);
    }
    throw error;
  }
  let withdrawalRequestId: string | null = null;
  if (input.withdrawal) {
    withdrawalRequestId = newUuid();
    await insertWithdrawalRequest(trx, {
      withdrawal_request_id: withdrawalRequestId,
      platform_code: input.platformCode,
      trade_id: tradeId,
      participant_code: input.holder.ownerParticipantCode,
      account_label: input.holder.accountLabel,
      asset: receive.asset,
      withdrawal_address: input.withdrawal.address,
      destination_tag: input.withdrawal.destinationTag,
      no_destination_tag: input.withdrawal.noDestinationTag,
      quantity: receive.amount,
      network_fee_quantity: input.networkFeeQuantity ?? '0',
      created_at: at,
    });
  }
  const row: TradeWithWithdrawal = { ...trade, withdrawal_request_id: withdrawalRequestId };
  await recordTradeStatus(trx, row, now);
  await scheduleNextStep(deps, trx, row);
  return row;
}

/** Movements of a settling trade, ordered by asset so concurrent settlements lock balances in one order. */
function settlementMovements(row: TradeWithWithdrawal): MovementInput[] {
  const base = {
    platformCode: row.platform_code,
    participantCode: row.owner_participant_code,
    accountLabel: row.account_label,
    movementType: 'final_settlement',
  };
  return [
    {
      ...base,
      asset: row.pay_asset,
      change: new Dec(row.pay_amount).negated().toFixed(),
      requireSufficient: true,
      // The operator's advance names the trade that cannot settle.
      sufficiencyField: 'trade_id',
    },
    { ...base, asset: row.receive_asset, change: new Dec(row.receive_amount).toFixed() },
  ].sort((a, b) => (a.asset < b.asset ? -1 : a.asset > b.asset ? 1 : 0));
}

/** Moves a locked trade to its next state, with its balances and notifications, in the caller's transaction. */
async function advanceLocked(
  deps: DomainDeps,
  trx: Trx,
  row: TradeWithWithdrawal,
): Promise<TradeWithWithdrawal> {
  const now = deps.clock.now();
  const at = new Date(now);
  let next: TradeWithWithdrawal;
  if (row.trade_state === 'accepted') {
    const updated = await updateTradeState(trx, row.trade_id, {
      trade_state: 'active',
      active_at: at,
      updated_at: at,
    });
    next = { ...updated, withdrawal_request_id: row.withdrawal_request_id };
  } else if (row.trade_state === 'active') {
    // wire-contract §7: balances move at settlement, in this transaction with the state and notifications.
    await applyMovements(
      trx,
      { runId: row.trade_id, runType: 'trade', timestamp: now },
      settlementMovements(row),
    );
    if (row.withdrawal_request_id !== null) {
      // Convert and withdraw: the bought asset leaves with the withdrawal as the trade settles.
      await applyMovements(trx, { runId: row.withdrawal_request_id, runType: 'withdrawal', timestamp: now }, [
        {
          platformCode: row.platform_code,
          participantCode: row.owner_participant_code,
          accountLabel: row.account_label,
          asset: row.receive_asset,
          change: new Dec(row.receive_amount).negated().toFixed(),
          movementType: 'withdrawal_confirmed',
          requireSufficient: true,
          sufficiencyField: 'trade_id',
        },
      ]);
      await markWithdrawalSettled(trx, row.withdrawal_request_id, at);
    }
    const updated = await updateTradeState(trx, row.trade_id, {
      trade_state: 'terminated',
      settled_at: at,
      updated_at: at,
    });
    next = { ...updated, withdrawal_request_id: row.withdrawal_request_id };
  } else {
    // spec 3.1: nothing follows terminated (the database refuses it too: trades_guard_update).
    throw conflict(`trade_id: trade ${row.trade_id} is terminated; it cannot change any more`);
  }
  await recordTradeStatus(trx, next, now);
  await scheduleNextStep(deps, trx, next);
  return next;
}

const NS_PER_MS = 1_000_000n;
/** Vendor: milliseconds or nanoseconds; epoch ms stay below 10^14 until the year 5138. */
const NANOSECONDS_FROM = 10n ** 14n;
const MAX_TIMESTAMP_FILTER = 10n ** 20n;

/**
 * `transaction_timestamp[op]` as a bound on our millisecond timestamps, exactly: for a value that is not a
 * whole millisecond (nanoseconds, or a fraction), "after X" is "after floor(X ms)", "at or after X" is "at or
 * after ceil(X ms)", and so on. `undefined` for no bound; `null` for a bound no trade can meet (equal to a
 * non-whole millisecond).
 */
function timestampBound(
  value: string | undefined,
  op: 'gt' | 'gte' | 'e' | 'lt' | 'lte',
): number | null | undefined {
  if (value === undefined) return undefined;
  const { integer: given, fractional } = splitDecimal(value);
  // As written in digits, at most 20 of them (nanoseconds until the year 5138); an exponent can say more.
  if (given >= MAX_TIMESTAMP_FILTER)
    throw invalid(`transaction_timestamp[${op}]: must be less than 10^20 (epoch ms or ns)`);
  const nanoseconds = given >= NANOSECONDS_FROM;
  const floor = nanoseconds ? given / NS_PER_MS : given;
  const whole = (!nanoseconds || given % NS_PER_MS === 0n) && !fractional;
  if (op === 'e') return whole ? Number(floor) : null;
  return Number(wholeBound(floor, whole, op));
}

export function createTradesService(deps: DomainDeps) {
  const { db } = deps;
  /** Where the settlement sweep's last run stopped: null, from the oldest (this process's runs; any may sweep). */
  let sweptUpTo: OverdueTrade | null = null;

  return {
    /** `GET /trades/{trade_id}`: another platform's trade → 403, an unknown one → 404 (wire-contract §9). */
    async get(platformCode: string, tradeId: string) {
      if (!isUuid(tradeId)) throw notFound();
      const row = await findPlatformTrade(db, platformCode, tradeId);
      if (row) return tradeView(row);
      if (await tradeExists(db, tradeId)) throw forbidden(`trade ${tradeId} belongs to another platform`);
      throw notFound();
    },

    /** `GET /trades` with the vendor's filters, newest first. */
    async list(platformCode: string, query: ListTradesQuery) {
      const page = pageOf(query, TRADES_DEFAULT_PAGE_SIZE);
      // Fields that are null on all our trades, or that hold the platform's own code: a filter on them
      // either keeps every trade or none.
      const matchesNothing =
        query.market_identifier_code !== undefined ||
        query.execution_id !== undefined ||
        query.settlement_schedule !== undefined ||
        (query.platform_code !== undefined && query.platform_code !== platformCode) ||
        (query.reporting_party !== undefined && query.reporting_party !== platformCode) ||
        query.omit_platform_code === platformCode ||
        (query.settlement_state !== undefined &&
          !['null', 'obligations_outstanding', 'settled'].includes(query.settlement_state));
      const fromSettlement: Record<string, TradeState> = {
        null: 'accepted',
        obligations_outstanding: 'active',
        settled: 'terminated',
      };
      const settlementTradeState = query.settlement_state
        ? fromSettlement[query.settlement_state]
        : undefined;
      // Two states no trade is in at once: nothing matches (after the checks below, which answer first).
      const statesConflict =
        query.trade_state !== undefined &&
        settlementTradeState !== undefined &&
        query.trade_state !== settlementTradeState;
      const bounds = {
        gt: timestampBound(query['transaction_timestamp[gt]'], 'gt'),
        gte: timestampBound(query['transaction_timestamp[gte]'], 'gte'),
        e: timestampBound(query['transaction_timestamp[e]'], 'e'),
        lt: timestampBound(query['transaction_timestamp[lt]'], 'lt'),
        lte: timestampBound(query['transaction_timestamp[lte]'], 'lte'),
      };
      const filters: TradeFilters = {
        clientTradeId: query.client_trade_id,
        orQuoteId: quoteOfClientTradeId(query.client_trade_id),
        tradeState: query.trade_state ?? settlementTradeState,
        accountLabel: query.account_label,
        // participant_code, named by the vendor's prose, is a party as party_code is.
        partyCodes: [query.party_code, query.participant_code].filter((c) => c !== undefined),
        underlying: query.underlying,
        asset: query.asset,
        after: bounds.gt ?? undefined,
        atOrAfter: bounds.gte ?? undefined,
        at: bounds.e ?? undefined,
        before: bounds.lt ?? undefined,
        atOrBefore: bounds.lte ?? undefined,
        matchesNothing: matchesNothing || statesConflict || Object.values(bounds).includes(null),
      };
      // Another platform's participant named as a party: 403, as the other lists' participant filters answer
      // (wire-contract §9), not an empty page (review). The house liquidity provider is every trade's
      // counterparty, and no platform's.
      for (const code of filters.partyCodes ?? []) {
        if (code !== LIQUIDITY_PROVIDER_CODE && (await codeOnOtherPlatform(db, platformCode, code)))
          throw forbidden('the named participant belongs to another platform');
      }
      const { rows, count } = await inOneSnapshot(db, (trx) =>
        listPlatformTrades(trx, platformCode, filters, page),
      );
      return { rows: rows.map(tradeView), ...pageFields(page, count) };
    },

    /**
     * `GET /admin/trades/{trade_id}`: any platform's trade, as the operator's calls answer it. A quote's id is not its
     * trade's: the 404 names the trade (review: support is given the quote id, the trade's client_trade_id).
     */
    async getForOperator(tradeId: string) {
      // The operator API says what it did not find (the CLI reads a bare 404 as another listener's).
      if (!isUuid(tradeId)) throw notFound(`trade ${tradeId} not found`);
      const row = await findTrade(db, tradeId);
      if (row) return adminTradeView(row);
      const ofQuote = await findTradeOfQuote(db, tradeId.toLowerCase());
      throw notFound(
        ofQuote
          ? `trade ${tradeId} not found: that is the id of the quote of trade ${ofQuote.trade_id}`
          : `trade ${tradeId} not found`,
      );
    },

    /** `GET /admin/trades`: one platform's trades, newest first, as the operator's calls answer them. */
    async listForOperator(query: AdminListTradesQuery) {
      if (!(await findPlatform(db, query.platform_code)))
        throw notFound(`platform ${query.platform_code} not found`);
      const page = pageOf(query, TRADES_DEFAULT_PAGE_SIZE);
      const { rows, count } = await inOneSnapshot(db, (trx) =>
        listPlatformTrades(
          trx,
          query.platform_code,
          {
            clientTradeId: query.client_trade_id,
            orQuoteId: quoteOfClientTradeId(query.client_trade_id),
            tradeState: query.trade_state,
            partyCodes: query.participant_code === undefined ? [] : [query.participant_code],
          },
          page,
        ),
      );
      return { items: rows.map(adminTradeView), ...pageFields(page, count) };
    },

    /** `POST /admin/trades/{trade_id}/advance`: the next state now (DESIGN §3). */
    async advance(tradeId: string, from?: TradeState) {
      // The operator API says what it did not find (the CLI reads a bare 404 as another listener's).
      if (!isUuid(tradeId)) throw notFound(`trade ${tradeId} not found`);
      const row = await db.transaction().execute(async (trx) => {
        const locked = await lockTrade(trx, tradeId);
        if (!locked) throw notFound(`trade ${tradeId} not found`);
        // A repeat of an advance whose answer was lost must not make a second step.
        if (from !== undefined && locked.trade_state !== from)
          throw conflict(`from: trade ${tradeId} is ${locked.trade_state}, not ${from}`);
        return advanceLocked(deps, trx, locked);
      });
      return adminTradeView(row);
    },

    /**
     * The settlement worker's step (trades.jobs.ts): moves the trade out of `from` if it is still there.
     * An operator's advance may have overtaken the timer; then there is nothing to do.
     */
    async settleStep(payload: SettleJobPayload): Promise<TradeState | null> {
      return db.transaction().execute(async (trx) => {
        const locked = await lockTrade(trx, payload.trade_id);
        if (!locked || locked.trade_state !== payload.from) return null;
        // The queue runs the job by the database's clock, the step is due by the service's: a job run early (a
        // clock behind the database's) waits for its time rather than move the trade before it is due, as a
        // funding session's expiry does (probe: active 32 ms after acceptance, its settlement_timestamp 2 s on).
        const early = nextStepDue(deps, locked) - deps.clock.now();
        if (early > 0) {
          await enqueueSettleStep(trx, payload, { delayMs: early });
          return null;
        }
        return (await advanceLocked(deps, trx, locked)).trade_state;
      });
    },

    /**
     * The recurring sweep (trades.jobs.ts): a trade whose next step is more than `stalledAfterMs` overdue has
     * its settlement job added again, due now with its attempts afresh. A job that used up its attempts (a
     * database unreachable for days) left the trade unsettled for good, its pay amount promised to it for ever
     * (review). Keyed, the job replaces one still waiting; one still failing (a balance corrected below what
     * the trade needs) is tried again each sweep. Returns how many were revived.
     *
     * A run takes `batch` trades at most, going on after the last one the run before took, and from the oldest
     * again once it reached the end: oldest first from the start each time, 500 trades that could not settle held
     * every newer stalled trade back for good (review).
     */
    async reviveStalledSettlements(stalledAfterMs: number, batch = REVIVE_BATCH): Promise<number> {
      const now = deps.clock.now();
      const { activeAfterMs, terminateAfterMs } = deps.config.settlement;
      const stalled = await findOverdueTrades(
        db,
        {
          accepted: new Date(now - activeAfterMs - stalledAfterMs),
          active: new Date(now - terminateAfterMs - stalledAfterMs),
          // Not revived before its own time has come (review: with a shorter delay configured since it was booked,
          // each sweep added a job due now that settleStep put back to its time). With a longer one, a stalled
          // trade is revived that much later: the index reads the trades by when they entered their state.
          acceptedDue: new Date(now - stalledAfterMs),
        },
        batch,
        sweptUpTo,
      );
      sweptUpTo = stalled.length < batch ? null : stalled.at(-1)!;
      let revived = 0;
      for (const trade of stalled) {
        // Under the trade's lock, and only if it is still where the read found it: its own step may have run
        // since (a backlog draining after an outage) and added the job of its next step, which the keyed job
        // added here would have replaced with a stale one, doing nothing, so the trade waited for the next
        // sweep (review). A trade whose row is held is being moved on right now: skipped, rather than holding
        // up the batch behind a step that waits for balances (review).
        revived += await db.transaction().execute(async (trx) => {
          if ((await lockTradeStateIfFree(trx, trade.trade_id)) !== trade.trade_state) return 0;
          await enqueueSettleStep(trx, { trade_id: trade.trade_id, from: trade.trade_state }, { delayMs: 0 });
          return 1;
        });
      }
      return revived;
    },

    /** `POST /admin/trades`: books a trade directly, e.g. a net settlement (allocation) trade. */
    async bookByOperator(body: BookTradeBody) {
      const errors: string[] = [];
      for (const field of ['quantity', 'price'] as const) {
        if (!new Dec(body[field]).gt(0)) errors.push(`${field}: must be greater than 0`);
      }
      const unknownNetwork = networkAssetProblem('underlying', body.underlying);
      if (unknownNetwork) errors.push(unknownNetwork);
      if (ledgerAsset(body.underlying) === body.quoted_currency) {
        errors.push('quoted_currency: must differ from the underlying');
      }
      if (errors.length) throw invalid(...errors);
      if (!(await findPlatform(db, body.platform_code))) {
        throw invalid(`platform_code: platform ${body.platform_code} not found`);
      }
      // A quote's trade is found by its quote_id as client_trade_id (wire-contract §7, spec 7.2): an operator's
      // trade under that id would block the quote's execute (409) and be taken for its trade by the platform's
      // look-up (probe). Quote ids are the service's own random UUIDs, so only an existing one can collide.
      const clientTradeId = body.client_trade_id;
      if (
        clientTradeId !== undefined &&
        isUuid(clientTradeId) &&
        (await isQuoteOf(db, body.platform_code, clientTradeId))
      ) {
        throw conflict(
          `client_trade_id: ${clientTradeId} is the id of a quote of platform ${body.platform_code}: only that quote's trade carries it`,
        );
      }
      const totalNotional = notionalAt(body.side, body.quantity, body.price);
      if (!new Dec(totalNotional).gt(0)) throw invalid('quantity: too small at this price');
      // The vendor's party amounts are at most 30 characters, as a quote's are.
      if (toDecimalString(body.quantity).length > MAX_AMOUNT_LENGTH) {
        throw invalid(`quantity: too large: a trade's amounts are at most ${MAX_AMOUNT_LENGTH} characters`);
      }
      if (totalNotional.length > MAX_AMOUNT_LENGTH) {
        throw invalid(
          `price: too large for this quantity: the notional ${totalNotional} is more than ${MAX_AMOUNT_LENGTH} characters`,
        );
      }
      const row = await db.transaction().execute(async (trx) => {
        const holder = await resolveTradingHolder(
          trx,
          body.platform_code,
          body.participant_code,
          body.account_label,
        );
        return bookTrade(deps, trx, {
          platformCode: body.platform_code,
          holder,
          source: 'operator',
          netSettlement: body.net_settlement ?? false,
          clientTradeId: body.client_trade_id ?? newUuid(),
          quoteId: null,
          side: body.side,
          underlying: body.underlying,
          quotedCurrency: body.quoted_currency,
          price: toDecimalString(body.price),
          quantity: toDecimalString(body.quantity),
          totalNotional,
          assetCostNotional: totalNotional,
          spreadBps: null,
          spreadNotional: null,
          networkFeeNotional: null,
          networkFeeQuantity: null,
          comment: body.comment ?? null,
          withdrawal: null,
          fundsField: 'quantity',
        });
      });
      return adminTradeView(row);
    },
  };
}

export type TradesService = ReturnType<typeof createTradesService>;
