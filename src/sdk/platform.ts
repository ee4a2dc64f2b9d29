import type { TimeResponse } from '../contract/time.schemas.ts';
import { SvcClient, type ClientOptions, type CallOptions } from './client.ts';
import { AccountsResource } from './resources/accounts.ts';
import { FundingResource } from './resources/funding.ts';
import { ParticipantsResource } from './resources/participants.ts';
import { QuotesResource } from './resources/quotes.ts';
import { TradesResource } from './resources/trades.ts';

/** `GET /time`: the server's clock (wire-contract §9). */
export type ServerTime = TimeResponse['message'];

/**
 * The SDK's entry point: one signed client (`http`, the request sender that owns signing, the retry rules
 * of spec 7.1–7.3 and error mapping) and one resource per area of the API, each with one method per
 * endpoint:
 *
 * | Property | Endpoints |
 * |---|---|
 * | `accounts` | `GET/POST /accounts`, `GET /accounts/{zrn}/details`, `POST/DELETE /accounts/{zrn}/tenants…` |
 * | `funding` | `POST /client_auth_token`, `POST /revoke_auth_token`, `POST /fund/rfq`, `GET /fund/transactions`, `GET /.well-known/jwks.json` |
 * | `participants` | `POST /participants/customers/new`, `GET /participants`, `GET /participants/{email}` |
 * | `quotes` | `GET/POST /liquidity/rfq`, `POST /liquidity/execute`, `GET/POST /convert_withdraw/rfq`, `POST /convert_withdraw/execute` |
 * | `trades` | `GET /trades`, `GET /trades/{trade_id}` |
 * | `time()` | `GET /time` |
 *
 * @example
 * import { createClient } from 'svc-platform/sdk';
 * const client = createClient({ baseUrl: 'https://api.example.com', apiKey, apiSecret, passphrase });
 * const { epoch } = await client.time();
 * const [trade] = await client.trades.list({ client_trade_id: quoteId });
 */
export class SvcPlatform {
  /** The request sender every resource uses; `http.send` gives the raw answer of one attempt. */
  readonly http: SvcClient;
  readonly accounts: AccountsResource;
  readonly funding: FundingResource;
  readonly participants: ParticipantsResource;
  readonly quotes: QuotesResource;
  readonly trades: TradesResource;

  constructor(options: ClientOptions | SvcClient) {
    this.http = options instanceof SvcClient ? options : new SvcClient(options);
    this.accounts = new AccountsResource(this.http);
    this.funding = new FundingResource(this.http);
    this.participants = new ParticipantsResource(this.http);
    this.quotes = new QuotesResource(this.http);
    this.trades = new TradesResource(this.http);
  }

  /**
   * `GET /time` (unauthenticated): the server's time. Requests are signed with a timestamp that must be
   * within 60 s of it (wire-contract §1), so this is the way to check a client's clock.
   *
   * @example
   * const { epoch } = await client.time();
   * if (Math.abs(Date.now() - epoch) > 30_000) console.warn('clock skew: signed requests may be refused');
   */
  async time(options: CallOptions = {}): Promise<ServerTime> {
    const body = await this.http.request<TimeResponse>('GET', '/time', { ...options, authenticate: false });
    return body.message;
  }
}

/**
 * Creates a client for one platform API key.
 *
 * @example
 * import { createClient } from 'svc-platform/sdk';
 * const client = createClient({
 *   baseUrl: process.env.SVC_URL!,
 *   apiKey: process.env.SVC_API_KEY!,
 *   apiSecret: process.env.SVC_API_SECRET!,
 *   passphrase: process.env.SVC_PASSPHRASE!,
 *   retry: { maxRetries: 3, deadlineMs: 60_000 }, // the defaults
 * });
 */
export function createClient(options: ClientOptions): SvcPlatform {
  return new SvcPlatform(options);
}
