import type { ColumnType } from 'kysely';
import type { CreatedAt, Numeric } from './foundation.tables.ts';

/** Tables of migration 0005 (quotes, trades and their withdrawals). */
type NullableNumeric = ColumnType<string | null, string | null | undefined, string | null>;
type Immutable<T> = ColumnType<T, T, never>;

export type QuoteKind = 'liquidity' | 'convert_withdraw';
export type TradeSide = 'buy' | 'sell';
export type TradeState = 'accepted' | 'active' | 'terminated';
export type TradeSource = 'liquidity' | 'convert_withdraw' | 'operator';

export interface QuotesTable {
  quote_id: string;
  request_id: string;
  platform_code: string;
  kind: QuoteKind;
  participant_code: string;
  owner_participant_code: string;
  account_label: string;
  zrn: string | null;
  side: TradeSide;
  underlying: string;
  quoted_currency: string;
  quantity: Numeric;
  price: Numeric;
  source_price: Numeric;
  total_notional: Numeric;
  asset_cost_notional: Numeric;
  spread_bps: Numeric;
  spread_notional: Numeric;
  network_fee_notional: NullableNumeric;
  network_fee_quantity: NullableNumeric;
  withdrawal_address: string | null;
  destination_tag: string | null;
  no_destination_tag: boolean | null;
  created_at: Date;
  expire_at: Date;
  executed_at: ColumnType<Date | null, Date | null | undefined, Date>;
}

export interface TradesTable {
  trade_id: string;
  platform_code: Immutable<string>;
  client_trade_id: Immutable<string>;
  quote_id: Immutable<string | null>;
  source: Immutable<TradeSource>;
  net_settlement: Immutable<boolean>;
  participant_code: Immutable<string>;
  owner_participant_code: Immutable<string>;
  account_label: Immutable<string>;
  zrn: Immutable<string | null>;
  counterparty_code: Immutable<string>;
  side: Immutable<TradeSide>;
  underlying: Immutable<string>;
  quoted_currency: Immutable<string>;
  trade_price: Immutable<string>;
  trade_quantity: Immutable<string>;
  total_notional: Immutable<string>;
  asset_cost_notional: Immutable<string>;
  spread_bps: Immutable<string | null>;
  spread_notional: Immutable<string | null>;
  network_fee_notional: Immutable<string | null>;
  network_fee_quantity: Immutable<string | null>;
  pay_asset: Immutable<string>;
  pay_amount: Immutable<string>;
  receive_asset: Immutable<string>;
  receive_amount: Immutable<string>;
  comment: Immutable<string | null>;
  // Only the state and its timestamps change (enforced by the trades_guard_update trigger).
  trade_state: ColumnType<TradeState, TradeState | undefined, TradeState>;
  transaction_at: Immutable<Date>;
  accepted_at: Immutable<Date>;
  settlement_at: Immutable<Date>;
  active_at: ColumnType<Date | null, Date | null | undefined, Date>;
  settled_at: ColumnType<Date | null, Date | null | undefined, Date>;
  updated_at: ColumnType<Date, Date, Date>;
  created_at: CreatedAt;
}

export interface WithdrawalRequestsTable {
  withdrawal_request_id: string;
  platform_code: string;
  trade_id: string;
  participant_code: string;
  account_label: string;
  asset: string;
  withdrawal_address: string;
  destination_tag: string | null;
  no_destination_tag: boolean | null;
  quantity: Numeric;
  network_fee_quantity: Numeric;
  status: ColumnType<'pending' | 'settled', 'pending' | 'settled' | undefined, 'pending' | 'settled'>;
  created_at: Date;
  settled_at: ColumnType<Date | null, Date | null | undefined, Date>;
}

export interface TradesTables {
  quotes: QuotesTable;
  trades: TradesTable;
  withdrawal_requests: WithdrawalRequestsTable;
}
