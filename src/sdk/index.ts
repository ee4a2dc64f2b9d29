/** svc-platform SDK: `import { SvcClient } from 'svc-platform/sdk'`. */
export {
  SvcClient,
  type ClientOptions,
  type ClientCredentials,
  type RequestOptions,
  type SvcResponse,
} from './client.ts';
export * from './errors.ts';
export { verifyWebhook, WebhookVerificationError } from './webhook-verify.ts';
export { signRequest, signingMessage } from '../contract/request-signature.ts';
export {
  AccountsResource,
  type AcceptedResponse,
  type BalanceAccount,
  type CreateCustomerAccountRequest,
  type CustomerAccountDetails,
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
  type ConvertWithdrawQuoteRequest,
  type Executed,
  type LiquidityExecution,
  type LiquidityQuote,
  type LiquidityQuoteRequest,
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
