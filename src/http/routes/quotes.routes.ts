import type { FastifyInstance } from 'fastify';
import {
  ConvertWithdrawExecuteBody,
  ConvertWithdrawExecutionResponse,
  ConvertWithdrawQuoteBody,
  ConvertWithdrawQuoteRequest,
  ConvertWithdrawQuoteResponse,
  ExecuteQuoteBody,
  LiquidityExecutionResponse,
  LiquidityQuoteBody,
  LiquidityQuoteRequest,
  LiquidityQuoteResponse,
} from '../../contract/quotes.schemas.ts';
import { publicErrorResponses } from '../../contract/responses.ts';
import type { QuotesService } from '../../domain/quotes/quotes.service.ts';
import { callerOf } from '../request-context.ts';

/**
 * Liquidity and convert-and-withdraw quotes and their execution (spec 4.6, 7.2; wire-contract §7).
 * The RFQ is offered as the vendor does: GET with the query string (200), POST with a JSON body (201).
 */
export async function quotesRoutes(app: FastifyInstance, { quotes }: { quotes: QuotesService }) {
  const liquidity = ['Liquidity'];
  const convertWithdraw = ['Convert and Withdraw'];

  app.get<{ Querystring: LiquidityQuoteRequest }>(
    '/liquidity/rfq',
    {
      // A quote is made (and stored) by this GET, as the vendor's is: no automatic HEAD route, which would
      // run the handler and store a quote for every HEAD (a monitoring probe, a link checker).
      exposeHeadRoute: false,
      schema: {
        tags: liquidity,
        operationId: 'getLiquidityQuote',
        summary: 'Request a liquidity quote (exactly one of quantity and total)',
        querystring: LiquidityQuoteRequest,
        response: { 200: LiquidityQuoteResponse, ...publicErrorResponses },
      },
    },
    async (request) => ({
      message: await quotes.requestLiquidityQuote(callerOf(request).platformCode, request.query),
    }),
  );

  app.post<{ Body: LiquidityQuoteBody }>(
    '/liquidity/rfq',
    {
      schema: {
        tags: liquidity,
        operationId: 'requestLiquidityQuote',
        summary: 'Request a liquidity quote (exactly one of quantity and total)',
        body: LiquidityQuoteBody,
        response: { 201: LiquidityQuoteResponse, ...publicErrorResponses },
      },
    },
    async (request, reply) =>
      reply
        .code(201)
        .send({ message: await quotes.requestLiquidityQuote(callerOf(request).platformCode, request.body) }),
  );

  app.post<{ Body: ExecuteQuoteBody }>(
    '/liquidity/execute',
    {
      schema: {
        tags: liquidity,
        operationId: 'executeLiquidityQuote',
        summary: 'Execute a quote: one trade, client_trade_id = quote_id; unknown/expired/executed → 404',
        body: ExecuteQuoteBody,
        response: { 200: LiquidityExecutionResponse, ...publicErrorResponses },
      },
    },
    async (request) => ({
      message: await quotes.executeLiquidityQuote(callerOf(request).platformCode, request.body.quote_id),
    }),
  );

  app.get<{ Querystring: ConvertWithdrawQuoteRequest }>(
    '/convert_withdraw/rfq',
    {
      // A quote is made (and stored) by this GET, as the vendor's is: no automatic HEAD route, which would
      // run the handler and store a quote for every HEAD (a monitoring probe, a link checker).
      exposeHeadRoute: false,
      schema: {
        tags: convertWithdraw,
        operationId: 'getConvertWithdrawQuote',
        summary:
          'Request a quote to buy an asset and withdraw it to an address (exactly one of quantity and total)',
        querystring: ConvertWithdrawQuoteRequest,
        response: { 200: ConvertWithdrawQuoteResponse, ...publicErrorResponses },
      },
    },
    async (request) => ({
      message: await quotes.requestConvertWithdrawQuote(callerOf(request).platformCode, request.query),
    }),
  );

  app.post<{ Body: ConvertWithdrawQuoteBody }>(
    '/convert_withdraw/rfq',
    {
      schema: {
        tags: convertWithdraw,
        operationId: 'requestConvertWithdrawQuote',
        summary:
          'Request a quote to buy an asset and withdraw it to an address (exactly one of quantity and total)',
        body: ConvertWithdrawQuoteBody,
        response: { 201: ConvertWithdrawQuoteResponse, ...publicErrorResponses },
      },
    },
    async (request, reply) =>
      reply.code(201).send({
        message: await quotes.requestConvertWithdrawQuote(callerOf(request).platformCode, request.body),
      }),
  );

  app.post<{ Body: ConvertWithdrawExecuteBody }>(
    '/convert_withdraw/execute',
    {
      schema: {
        tags: convertWithdraw,
        operationId: 'executeConvertWithdrawQuote',
        summary: 'Execute a convert-and-withdraw quote: a trade and its withdrawal request',
        body: ConvertWithdrawExecuteBody,
        response: { 200: ConvertWithdrawExecutionResponse, ...publicErrorResponses },
      },
    },
    async (request) => ({
      message: await quotes.executeConvertWithdrawQuote(
        callerOf(request).platformCode,
        request.body.quote_id,
      ),
    }),
  );
}
