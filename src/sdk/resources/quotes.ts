import type {
  ConvertWithdrawExecution,
  ConvertWithdrawQuote,
  ConvertWithdrawQuoteBody,
  ConvertWithdrawQuoteRequest,
  LiquidityExecution,
  LiquidityQuoteBody,
  LiquidityQuoteRequest,
  RequestedLiquidityQuote,
} from '../../contract/quotes.schemas.ts';
import type { Trade } from '../../contract/trades.schemas.ts';
import { lookupOptions, type QueryValue, type CallOptions, type SvcClient } from '../client.ts';
import type { ResolvedRetryOptions } from '../backoff.ts';
import { TradesResource } from './trades.ts';

export type {
  ConvertWithdrawExecution,
  ConvertWithdrawQuote,
  ConvertWithdrawQuoteBody,
  ConvertWithdrawQuoteRequest,
  LiquidityExecution,
  LiquidityQuote,
  LiquidityQuoteBody,
  LiquidityQuoteRequest,
  RequestedLiquidityQuote,
} from '../../contract/quotes.schemas.ts';

/**
 * What an execute call resolves to (spec 7.2):
 * - `executed`: the server's answer to this call;
 * - `found`: the answer was lost (502/504 or no response) or was a 404 because an earlier attempt had
 *   executed the quote already, and `GET /trades?client_trade_id=<quote_id>` found the trade.
 * `quote_id` is the quote that made the trade (a new one after a re-quote, see `quoteAndExecute…`).
 */
export type Executed<M> =
  | { outcome: 'executed'; trade_id: string; quote_id: string; execution: M }
  | { outcome: 'found'; trade_id: string; quote_id: string; trade: Trade };

/** The envelope, what the idempotence check found instead, or the outcome of a re-quote. */
type Answer<M> = { message: M } | { found: Trade } | { requoted: Executed<M> };

/**
 * Liquidity and convert-and-withdraw quotes (spec 4.6) and their execution, with spec 7.2's recovery
 * built in: after a 502/504 (or no answer) on execute the SDK looks the trade up by
 * `client_trade_id = quote_id` before resending, and after a 404 it looks it up before giving up; with
 * `retry: { allowRequote: true }` the `quoteAndExecute…` methods then request a new quote and execute it.
 *
 * @example
 * const client = createClient({ baseUrl, apiKey, apiSecret, passphrase }); // client.quotes is this resource
 * const quote = await client.quotes.requestLiquidityQuote({ side: 'buy', underlying: 'BTC', quoted_currency: 'USD', quantity: '0.01', participant_code: 'CUST01' });
 * const result = await client.quotes.executeLiquidityQuote(quote.quote_id);
 * console.log(result.outcome, result.trade_id); // 'executed' '0f6c…'
 */
export class QuotesResource {
  private readonly trades: TradesResource;

  constructor(private readonly client: SvcClient) {
    this.trades = new TradesResource(client);
  }

  /**
   * `GET /liquidity/rfq`: a liquidity quote (exactly one of `quantity` and `total`). It can be executed
   * once, until `expire_ts` (the platform's quote expiry, 30 s by default).
   *
   * @example
   * const quote = await client.quotes.getLiquidityQuote({ side: 'sell', underlying: 'ETH', quoted_currency: 'USD', total: '250' });
   */
  getLiquidityQuote(
    query: LiquidityQuoteRequest,
    options: CallOptions = {},
  ): Promise<RequestedLiquidityQuote> {
    return this.rfq<RequestedLiquidityQuote>('GET', '/liquidity/rfq', query, options);
  }

  /**
   * `POST /liquidity/rfq`: the same quote, asked with a JSON body.
   *
   * @example
   * const quote = await client.quotes.requestLiquidityQuote({ side: 'buy', underlying: 'BTC', quoted_currency: 'USD', quantity: '0.5', spread: '25' });
   */
  requestLiquidityQuote(
    body: LiquidityQuoteBody,
    options: CallOptions = {},
  ): Promise<RequestedLiquidityQuote> {
    return this.rfq<RequestedLiquidityQuote>('POST', '/liquidity/rfq', body, options);
  }

  /**
   * `POST /liquidity/execute`: books the quote's trade (`accepted`; it settles later). An unknown,
   * expired or already executed quote is a 404: the SDK first looks for the trade (it may be this quote's,
   * from an attempt whose answer was lost) and resolves `found` if there is one, else throws
   * `SvcNotFoundError` (the quote expired: request a new one). Insufficient balance → `SvcInvalidRequestError`.
   * This method does not know the quote's parameters, so it never re-quotes: for spec 7.2's re-quote, use
   * {@link quoteAndExecuteLiquidity}.
   *
   * @example
   * const result = await client.quotes.executeLiquidityQuote(quote.quote_id);
   * if (result.outcome === 'executed') console.log(result.execution.trade_ids_list);
   */
  executeLiquidityQuote(quoteId: string, options: CallOptions = {}): Promise<Executed<LiquidityExecution>> {
    return this.execute<LiquidityExecution>('/liquidity/execute', quoteId, options);
  }

  /**
   * Spec 7.2 end to end: requests a liquidity quote and executes it; if execution answers 404 and no trade
   * carries the quote's id (the quote expired), requests a new quote and executes that, when
   * `retry.allowRequote` is true (at most `retry.maxRequotes` times).
   *
   * @example
   * const result = await client.quotes.quoteAndExecuteLiquidity(
   *   { side: 'buy', underlying: 'BTC', quoted_currency: 'USD', quantity: '0.01' },
   *   { retry: { allowRequote: true } },
   * );
   */
  quoteAndExecuteLiquidity(
    request: LiquidityQuoteRequest,
    options: CallOptions = {},
  ): Promise<Executed<LiquidityExecution>> {
    return this.quoteAndExecute(
      () => this.getLiquidityQuote(request, options),
      '/liquidity/execute',
      options,
    );
  }

  /**
   * `GET /convert_withdraw/rfq`: a quote to buy an asset and withdraw it to `withdrawal_address`.
   *
   * @example
   * const quote = await client.quotes.getConvertWithdrawQuote({ side: 'buy', underlying: 'USDC.ETH', quoted_currency: 'USD', total: '100', withdrawal_address: '0x…' });
   */
  getConvertWithdrawQuote(
    query: ConvertWithdrawQuoteRequest,
    options: CallOptions = {},
  ): Promise<ConvertWithdrawQuote> {
    return this.rfq<ConvertWithdrawQuote>('GET', '/convert_withdraw/rfq', query, options);
  }

  /**
   * `POST /convert_withdraw/rfq`: the same quote, asked with a JSON body.
   *
   * @example
   * const quote = await client.quotes.requestConvertWithdrawQuote({ side: 'buy', underlying: 'BTC', quoted_currency: 'USD', quantity: '0.1', withdrawal_address: 'bc1q…' });
   */
  requestConvertWithdrawQuote(
    body: ConvertWithdrawQuoteBody,
    options: CallOptions = {},
  ): Promise<ConvertWithdrawQuote> {
    return this.rfq<ConvertWithdrawQuote>('POST', '/convert_withdraw/rfq', body, options);
  }

  /**
   * `POST /convert_withdraw/execute`: books the trade and its withdrawal request (`withdrawal_request_id`);
   * the withdrawal is debited when the trade settles. Same recovery as {@link executeLiquidityQuote}; to
   * re-quote an expired quote, use {@link quoteAndExecuteConvertWithdraw}.
   *
   * @example
   * const result = await client.quotes.executeConvertWithdrawQuote(quote.quote_id);
   * if (result.outcome === 'executed') console.log(result.execution.withdrawal_request_id);
   */
  executeConvertWithdrawQuote(
    quoteId: string,
    options: CallOptions = {},
  ): Promise<Executed<ConvertWithdrawExecution>> {
    return this.execute<ConvertWithdrawExecution>('/convert_withdraw/execute', quoteId, options);
  }

  /**
   * Spec 7.2 end to end for convert and withdraw; see {@link quoteAndExecuteLiquidity}.
   *
   * @example
   * const result = await client.quotes.quoteAndExecuteConvertWithdraw(
   *   { side: 'buy', underlying: 'BTC', quoted_currency: 'USD', quantity: '0.1', withdrawal_address: 'bc1q…' },
   *   { retry: { allowRequote: true } },
   * );
   */
  quoteAndExecuteConvertWithdraw(
    request: ConvertWithdrawQuoteRequest,
    options: CallOptions = {},
  ): Promise<Executed<ConvertWithdrawExecution>> {
    return this.quoteAndExecute(
      () => this.getConvertWithdrawQuote(request, options),
      '/convert_withdraw/execute',
      options,
    );
  }

  /** An RFQ asked either way the API allows: the parameters as a query string (GET) or a JSON body (POST). */
  private async rfq<Q>(
    method: 'GET' | 'POST',
    path: string,
    // A GET's query is the request shape, which the body shape extends with its body-only fields.
    params: LiquidityQuoteBody | ConvertWithdrawQuoteBody,
    options: CallOptions,
  ): Promise<Q> {
    const response = await this.client.request<{ message: Q }>(
      method,
      path,
      method === 'GET'
        ? { ...options, query: params as unknown as Record<string, QueryValue> }
        : { ...options, body: params },
    );
    return response.message;
  }

  private async findTrade(quoteId: string, options: CallOptions): Promise<Trade | undefined> {
    const [trade] = await this.trades.list({ client_trade_id: quoteId }, options);
    return trade;
  }

  private async execute<M extends { trade_id: string }>(
    path: string,
    quoteId: string,
    options: CallOptions,
    requote?: (resolved: ResolvedRetryOptions) => Promise<Executed<M> | undefined>,
  ): Promise<Executed<M>> {
    // The simulator header (cert) rehearses one failure; the idempotence check must see the real state, within the
    // execution's budget (`startedAt`, its start).
    const found = async (startedAt: number): Promise<Answer<M> | undefined> => {
      const trade = await this.findTrade(quoteId, lookupOptions(options, startedAt));
      return trade ? { found: trade } : undefined;
    };
    const answer = await this.client.request<Answer<M>>(
      'POST',
      path,
      { ...options, body: { quote_id: quoteId } },
      {
        // spec 7.1.2, 7.2: after 502/504 the state is unknown: look before resending.
        idempotenceCheck: found,
        // spec 7.2: 404 → look the trade up; none → the quote expired (re-quote if allowed).
        recover404: async (resolved, { earlierUnanswered, startedAt }) => {
          const trade = await found(startedAt);
          if (trade) return trade;
          // An attempt that got no answer may still execute this quote: a new one could make a second trade.
          if (earlierUnanswered) return undefined;
          const requoted = requote ? await requote(resolved) : undefined;
          return requoted ? { requoted } : undefined;
        },
      },
    );
    if ('requoted' in answer) return answer.requoted;
    if ('found' in answer) {
      return { outcome: 'found', trade_id: answer.found.trade_id, quote_id: quoteId, trade: answer.found };
    }
    return {
      outcome: 'executed',
      trade_id: answer.message.trade_id,
      quote_id: quoteId,
      execution: answer.message,
    };
  }

  private async quoteAndExecute<M extends { trade_id: string }>(
    quote: () => Promise<{ quote_id: string }>,
    path: string,
    options: CallOptions,
  ): Promise<Executed<M>> {
    let requotes = 0;
    const attempt = async (): Promise<Executed<M>> => {
      const { quote_id: quoteId } = await quote();
      return this.execute<M>(path, quoteId, options, async (resolved) => {
        if (!resolved.allowRequote || requotes >= resolved.maxRequotes) return undefined;
        requotes++;
        return attempt();
      });
    };
    return attempt();
  }
}
