import type { Static } from 'typebox';
import type {
  ListTradesQuery as ServerTradesQuery,
  Trade,
  TradesPage as TradesPageSchema,
} from '../../contract/trades.schemas.ts';
import type { CallOptions, QueryValue, SvcClient } from '../client.ts';

export type { Trade, TradeParty, TradeStatusNotification } from '../../contract/trades.schemas.ts';
import { pathSegment } from '../path-segment.ts';
export {
  type TradeState,
  TRADE_NOTIFICATION_OMITTED_FIELDS,
  TRADE_STATES,
} from '../../contract/wire-values.ts';

type TimestampBound = `transaction_timestamp[${'gt' | 'gte' | 'e' | 'lt' | 'lte'}]`;

/**
 * The filters of `GET /trades`. The timestamp bounds may be numbers, as the vendor types them: epoch ms (a
 * fraction allowed) or ns, which a query string carries as the number prints (an exponent too). Give
 * nanoseconds as a string to keep them exact: a number past 2^53 has lost its last digits.
 */
export type ListTradesQuery = Omit<ServerTradesQuery, TimestampBound> &
  Partial<Record<TimestampBound, string | number>>;

/** A page of `GET /trades`, newest first (the contract's `TradesPage`). */
export type TradesPage = Static<typeof TradesPageSchema>;

/**
 * The platform's trades (spec 4.6). A trade goes accepted → active → terminated (spec 3.1); the
 * `trade_status_changed` webhook tells each change, and the fields it leaves out (spec 2.4) are here.
 *
 * @example
 * const client = createClient({ baseUrl, apiKey, apiSecret, passphrase }); // client.trades is this resource
 * const trade = await client.trades.get(tradeId);
 * console.log(trade.trade_state, trade.settled_timestamp);
 */
export class TradesResource {
  constructor(private readonly client: SvcClient) {}

  /**
   * `GET /trades`: one page of the platform's trades, newest first. Filters: `client_trade_id` (an
   * executed quote's `quote_id`), `trade_state`, `settlement_state`, `account_label`, `party_code`,
   * `transaction_timestamp[gt|gte|e|lt|lte]` (ms or ns, a fraction or an exponent allowed), `page` (from 1),
   * `page_size` (up to 100); a party of another platform → 403.
   *
   * @example
   * const { message, total_pages } = await client.trades.listPage({ trade_state: 'terminated', page: 2 });
   */
  listPage(query: ListTradesQuery = {}, options: CallOptions = {}): Promise<TradesPage> {
    return this.client.request<TradesPage>('GET', '/trades', {
      ...options,
      query: query as Record<string, QueryValue>,
    });
  }

  /**
   * `GET /trades`, the trades of one page only (the first unless `page` says otherwise).
   *
   * @example
   * const [trade] = await client.trades.list({ client_trade_id: quoteId }); // spec 7.2's check
   */
  async list(query: ListTradesQuery = {}, options: CallOptions = {}): Promise<Trade[]> {
    return (await this.listPage(query, options)).message;
  }

  /**
   * `GET /trades/{trade_id}`. Unknown → `SvcNotFoundError`; another platform's → `SvcPermissionError`.
   *
   * @example
   * const trade = await client.trades.get('6b1f0c0e-…');
   */
  async get(tradeId: string, options: CallOptions = {}): Promise<Trade> {
    const response = await this.client.request<{ message: Trade }>(
      'GET',
      `/trades/${pathSegment(tradeId, 'tradeId')}`,
      options,
    );
    return response.message;
  }
}
