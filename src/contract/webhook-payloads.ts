import type { CustomerAccountDetails } from './accounts.schemas.ts';
import type { BALANCE_ACCOUNT_TYPES, PARTICIPANT_STATUS_VALUES } from './wire-values.ts';
import type { FundEvent } from './funding.schemas.ts';
import type { TradeStatusNotification } from './trades.schemas.ts';
import type { WebhookPayloadType } from './webhook-headers.ts';

/**
 * The body of each notification (wire-contract §5), by its `x-svc-hook-payload-type`: what the service sends and
 * what a receiver parses, one type for both (the service's code that records them is checked against these).
 */

/** `account_balance.changed`: an available or collateral balance after one movement. */
export interface AccountBalanceChanged {
  participant_code: string;
  account_group: string;
  account_label: string;
  account_type: (typeof BALANCE_ACCOUNT_TYPES)[number];
  asset: string;
  /** The balance after the movement, a decimal string. */
  balance: string;
  run_id: string;
  run_type: string;
  /** Epoch ms; no earlier than the account's previous notification's. */
  timestamp: number;
  movements: Array<{
    account_id: string;
    /** Decimal string; negative for a debit. */
    change: string;
    movement_id: string;
    movement_timestamp: number;
    movement_type: string;
  }>;
}

/** `participant_status_changed`. */
export interface ParticipantStatusChanged {
  participant_code: string;
  participant_status: (typeof PARTICIPANT_STATUS_VALUES)[number];
  /** Only when the operator gave one. */
  reason_code?: string;
  /** Epoch ms. */
  timestamp: number;
}

/** `deposit_fund_complete`: the fund event (spec 2.2); a failed one repeats its `status_reason` as `reason`. */
export type DepositFundComplete = FundEvent & { reason?: string };

/** Each payload type's body. */
export interface WebhookPayloads {
  trade_status_changed: TradeStatusNotification;
  'account_balance.changed': AccountBalanceChanged;
  deposit_fund_complete: DepositFundComplete;
  /** The details as given without `include`: never with the pending tenant changes. */
  customer_account_status_changed: Omit<CustomerAccountDetails, 'pending_tenant_changes'>;
  participant_status_changed: ParticipantStatusChanged;
}

/** Every payload type has its body here (a type added to WEBHOOK_PAYLOAD_TYPES without one fails to compile). */
export type WebhookPayload<T extends WebhookPayloadType = WebhookPayloadType> = WebhookPayloads[T];
