import { JWKS_PATH } from '../../contract/wire-values.ts';
import type {
  ClientAuthToken,
  ClientAuthTokenBody,
  FundQuote,
  FundRfqBody,
  FundTransactionsQuery as ServerTransactionsQuery,
  Jwks,
} from '../../contract/funding.schemas.ts';
import type { FundTransactionsResponse } from '../../contract/funding.schemas.ts';
import type { Static } from 'typebox';
import type { CallOptions, QueryValue, SvcClient } from '../client.ts';

export type {
  ClientAuthToken,
  ClientAuthTokenBody,
  FundEvent,
  FundQuote,
  FundRfqBody,
  Jwks,
} from '../../contract/funding.schemas.ts';
export { type ClientTokenPermission, CLIENT_TOKEN_PERMISSIONS } from '../../contract/wire-values.ts';

type DepositTimestampBound =
  'deposit_timestamp_gte' | 'deposit_timestamp_gt' | 'deposit_timestamp_lt' | 'deposit_timestamp_lte';

/**
 * The filters of `GET /fund/transactions`. The deposit timestamp bounds may be numbers, as the vendor types
 * them (epoch ms, a fraction allowed): a query string carries their decimal digits, which the server reads
 * as text.
 */
export type FundTransactionsQuery = Omit<ServerTransactionsQuery, DepositTimestampBound> &
  Partial<Record<DepositTimestampBound, string | number>>;

/** A page of `GET /fund/transactions`, newest first (the contract's `FundTransactionsResponse`). */
export type FundTransactionsPage = Static<typeof FundTransactionsResponse>;

/**
 * Account funding (spec 2.2, 2.3, 4.3–4.5; wire-contract §6): SDK tokens, fund quotes with the deposit
 * address, and fund events. One method per endpoint; each applies the retry rules of spec 7 through
 * `SvcClient.request` and throws the status family's `SvcError`.
 *
 * @example
 * const client = createClient({ baseUrl, apiKey, apiSecret, passphrase }); // client.funding is this resource
 * const quote = await client.funding.requestQuote({ participant_code: 'PAR001', fund_asset: 'USDC.ETH', client_fund_id: 'order-9' });
 * showToCustomer(quote.deposit_address);
 */
export class FundingResource {
  constructor(private readonly client: SvcClient) {}

  /**
   * `POST /client_auth_token`: a JWT (valid one hour) for the Account Funding SDK. With `fwc` in
   * `permissions` it opens a funding session: later deposits of the participant carry `reference_id`
   * (spec 2.3) until a newer session; `deposit_intent_id` identifies that session.
   *
   * @example
   * const { token } = await client.funding.createClientToken({ participant_code: 'PAR001', permissions: ['fwc'], reference_id: 'order-9' });
   */
  async createClientToken(body: ClientAuthTokenBody, options: CallOptions = {}): Promise<ClientAuthToken> {
    const response = await this.client.request<{ message: ClientAuthToken }>('POST', '/client_auth_token', {
      ...options,
      body,
    });
    return response.message;
  }

  /**
   * `POST /revoke_auth_token`: revokes a token this platform was issued (204). Revoking twice is harmless.
   *
   * @example
   * await client.funding.revokeClientToken(token);
   */
  async revokeClientToken(token: string, options: CallOptions = {}): Promise<void> {
    await this.client.request('POST', '/revoke_auth_token', { ...options, body: { token } });
  }

  /**
   * `POST /fund/rfq`: the rate and fee terms for a deposit of `fund_asset`, and the deposit address to show
   * the end customer (stable per participant, account label and network). Opens a funding session whose
   * reference is `client_fund_id`, echoed as `reference_id`.
   *
   * @example
   * const { deposit_address, rate } = await client.funding.requestQuote({ participant_code: 'PAR001', fund_asset: 'BTC.BTC' });
   */
  async requestQuote(body: FundRfqBody, options: CallOptions = {}): Promise<FundQuote> {
    const response = await this.client.request<{ message: FundQuote }>('POST', '/fund/rfq', {
      ...options,
      body,
    });
    return response.message;
  }

  /**
   * `GET /fund/transactions`: the platform's fund events (spec 2.2), newest first; `page_size` at most 50.
   *
   * @example
   * const { message } = await client.funding.listTransactions({ reference_id: 'order-9', success: true });
   */
  listTransactions(
    query: FundTransactionsQuery = {},
    options: CallOptions = {},
  ): Promise<FundTransactionsPage> {
    return this.client.request<FundTransactionsPage>('GET', '/fund/transactions', {
      ...options,
      query: query as Record<string, QueryValue>,
    });
  }

  /**
   * `GET /.well-known/jwks.json` (unauthenticated): the public keys that verify the SDK tokens, for example
   * with `jose`'s `createLocalJWKSet`.
   *
   * @example
   * const keys = createLocalJWKSet(await client.funding.signingKeys());
   * await jwtVerify(token, keys, { issuer: 'svc-platform' });
   */
  signingKeys(options: CallOptions = {}): Promise<Jwks> {
    // Unauthenticated (wire-contract §1), but a GET like any other: same retries and error classes.
    return this.client.request<Jwks>('GET', JWKS_PATH, { ...options, authenticate: false });
  }
}
