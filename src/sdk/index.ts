/**
 * svc-platform SDK: `import { createClient, verifyWebhook } from 'svc-platform/sdk'`.
 * `createClient` gives the facade (`client.accounts`, `.funding`, `.participants`, `.quotes`, `.trades`,
 * `.time()`); the resource classes stay exported for code that builds them on its own `SvcClient`.
 */
export { createClient, SvcPlatform, type ServerTime } from './platform.ts';
export {
  DEFAULT_TIMEOUT_MS,
  SvcClient,
  type ClientOptions,
  type ClientCredentials,
  type QueryValue,
  type CallOptions,
  type RequestOptions,
  type SvcResponse,
} from './client.ts';
export * from './errors.ts';
export {
  DEFAULT_RETRY_OPTIONS,
  backoffDelay,
  type ResolvedRetryOptions,
  type RetryOptions,
} from './backoff.ts';
export {
  RATE_LIMIT_WAIT_MS,
  RETRY_TABLE,
  SPEC_7_3_MESSAGES,
  decideRetry,
  type RetryAction,
  type RetryClass,
  type RetryRule,
} from './retry-policy.ts';
export {
  DEFAULT_WEBHOOK_TOLERANCE_MS,
  verifyWebhook,
  WebhookVerificationError,
  type VerifiedWebhook,
  type VerifyWebhookOptions,
  type WebhookVerificationReason,
} from './webhook-verify.ts';
export {
  WEBHOOK_PAYLOAD_TYPES,
  isWebhookPayloadType,
  type WebhookPayloadType,
} from '../contract/webhook-headers.ts';
export type {
  AccountBalanceChanged,
  DepositFundComplete,
  ParticipantStatusChanged,
  WebhookPayload,
  WebhookPayloads,
} from '../contract/webhook-payloads.ts';
export { signRequest, signingMessage } from '../contract/request-signature.ts';
export { standardWebhooksSecret } from '../contract/webhook-signature.ts';
export {
  AccountsResource,
  type AcceptedResponse,
  type BalanceAccount,
  type CreateCustomerAccountRequest,
  type CustomerAccountDetails,
  type CustomerAccountDetailsWithPending,
  type ListAccountsQuery,
  type ListAccountsResponse,
  type PendingTenantChange,
} from './resources/accounts.ts';
export {
  CLIENT_TOKEN_PERMISSIONS,
  FundingResource,
  type ClientAuthToken,
  type ClientAuthTokenBody,
  type ClientTokenPermission,
  type FundEvent,
  type FundQuote,
  type FundRfqBody,
  type FundTransactionsPage,
  type FundTransactionsQuery,
  type Jwks,
} from './resources/funding.ts';
export {
  DATA_USED_WITH_DIFFERENT_REQUEST_ID,
  EMAIL_ALREADY_EXISTS,
  ParticipantsResource,
  type CreatedCustomer,
  type CustomerCreation,
  type ListParticipantsQuery,
  type ListParticipantsResponse,
  type ParticipantByEmail,
  type ParticipantEntity,
  type PostCustomerBody,
} from './resources/participants.ts';
export {
  QuotesResource,
  type ConvertWithdrawExecution,
  type ConvertWithdrawQuote,
  type ConvertWithdrawQuoteBody,
  type ConvertWithdrawQuoteRequest,
  type Executed,
  type LiquidityExecution,
  type LiquidityQuote,
  type LiquidityQuoteBody,
  type LiquidityQuoteRequest,
  type RequestedLiquidityQuote,
} from './resources/quotes.ts';
export {
  TRADE_NOTIFICATION_OMITTED_FIELDS,
  TRADE_STATES,
  TradesResource,
  type ListTradesQuery,
  type Trade,
  type TradeParty,
  type TradesPage,
  type TradeState,
  type TradeStatusNotification,
} from './resources/trades.ts';
