import type {
  AdminTrade,
  Trade,
  TradeParty,
  TradeStatusNotification,
} from '../../contract/trades.schemas.ts';
import { Dec, toDecimalString } from '../../lib/decimal.ts';
import type { TradeWithWithdrawal } from './trades.repository.ts';
import { TRADE_NOTIFICATION_OMITTED_FIELDS } from '../../contract/wire-values.ts';

/**
 * A trade row as the vendor's TradeResponseEntity (`GET /trades/{trade_id}`), and the trade status
 * notification derived from it (spec 2.4, wire-contract §5). Fields for capabilities we do not have
 * (CLOB executions, issuer fees, payment processors, forwards) are null, as the vendor sends them.
 */
const ms = (date: Date | null) => (date === null ? null : date.getTime());
const decimal = (value: string | null) => (value === null ? null : toDecimalString(value));
const spreadApplied = (row: TradeWithWithdrawal) =>
  row.spread_bps !== null && !new Dec(row.spread_bps).isZero();

/** Per party, as the vendor: accepted → not attempted (null), active → outstanding, terminated → settled. */
function settlementState(row: TradeWithWithdrawal): TradeParty['settlement_state'] {
  if (row.trade_state === 'accepted') return null;
  return row.trade_state === 'active' ? 'obligations_outstanding' : 'settled';
}

function parties(row: TradeWithWithdrawal): TradeParty[] {
  // Vendor: each party's asset and amount are what it receives; the buyer receives the underlying.
  const quantity = toDecimalString(row.trade_quantity);
  const notional = toDecimalString(row.total_notional);
  const common = {
    client_order_id: null,
    order_id: null,
    obligations_outstanding_timestamp: ms(row.active_at),
    current_obligations_met_timestamp: ms(row.settled_at),
    settlement_state: settlementState(row),
    execution_id: null,
    settling: true,
    collateral_percentage: null,
    account_profile: null,
    manual_order_indicator: null,
  };
  const buys = row.side === 'buy';
  return [
    {
      ...common,
      side: row.side,
      participant_code: row.owner_participant_code,
      asset: buys ? row.underlying : row.quoted_currency,
      amount: buys ? quantity : notional,
      account_label: row.account_label,
      // Who placed it: a tenant trades on its primary holder's account (issue 5).
      trader: row.participant_code,
      zrn: row.zrn,
    },
    {
      ...common,
      side: buys ? 'sell' : 'buy',
      participant_code: row.counterparty_code,
      asset: buys ? row.quoted_currency : row.underlying,
      amount: buys ? notional : quantity,
      account_label: null,
      trader: null,
      zrn: null,
    },
  ];
}

export function tradeView(row: TradeWithWithdrawal): Trade {
  return {
    trade_id: row.trade_id,
    client_trade_id: row.client_trade_id,
    batch_trade_id: null,
    trade_reporter: row.platform_code,
    trade_reporter_code: row.platform_code,
    reporting_party: row.platform_code,
    settlement_schedule: null,
    platform_code: row.platform_code,
    market_identifier_code: null,
    symbol: `${row.underlying}/${row.quoted_currency}`,
    product_type: 'spot',
    trade_type: 'regular',
    trade_price: toDecimalString(row.trade_price),
    trade_quantity: toDecimalString(row.trade_quantity),
    trade_state: row.trade_state,
    physical_delivery: true,
    transaction_timestamp: row.transaction_at.getTime(),
    accepted_timestamp: row.accepted_at.getTime(),
    defaulted_timestamp: null,
    settled_timestamp: ms(row.settled_at),
    comment: row.comment,
    last_update: row.updated_at.getTime(),
    parties_anonymous: false,
    settlement_price_index_id: null,
    contract_size: 1,
    underlying: row.underlying,
    quoted_currency: row.quoted_currency,
    settlement_timestamp: row.settlement_at.getTime(),
    expiry_timestamp: null,
    bank_fee: null,
    // The vendor's TradeResponseEntity: both null when no spread applied.
    ...(spreadApplied(row)
      ? { spread_notional: decimal(row.spread_notional), spread_bps: decimal(row.spread_bps) }
      : { spread_notional: null, spread_bps: null }),
    issuer_fee_rate: null,
    issuer_fee_amount: null,
    issuer_fee_payor_type: null,
    origin: row.source === 'operator' ? null : 'rest_api',
    parties: parties(row),
    session_id: '',
    payment_processor: null,
    fees: [],
    network_fee_notional: decimal(row.network_fee_notional),
    network_fee_quantity: decimal(row.network_fee_quantity),
    total_notional: toDecimalString(row.total_notional),
    asset_cost_notional: toDecimalString(row.asset_cost_notional),
  };
}

export function adminTradeView(row: TradeWithWithdrawal): AdminTrade {
  return {
    ...tradeView(row),
    net_settlement: row.net_settlement,
    withdrawal_request_id: row.withdrawal_request_id,
  };
}

const OMITTED: ReadonlySet<string> = new Set(TRADE_NOTIFICATION_OMITTED_FIELDS);

/** spec 2.4: the GET object without exactly the twelve listed fields; wire-contract §5: plus `timestamp`. */
export function tradeNotification(row: TradeWithWithdrawal, timestamp: number): TradeStatusNotification {
  const payload = Object.fromEntries(
    Object.entries(tradeView(row)).filter(([field]) => !OMITTED.has(field)),
  ) as Omit<TradeStatusNotification, 'timestamp'>;
  return { ...payload, timestamp };
}
