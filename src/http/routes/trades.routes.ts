import type { FastifyInstance } from 'fastify';
import { publicErrorResponses } from '../../contract/responses.ts';
import { ListTradesQuery, TradeParams, TradeResponse, TradesPage } from '../../contract/trades.schemas.ts';
import type { TradesService } from '../../domain/trades/trades.service.ts';
import { callerOf } from '../request-context.ts';

/** The calling platform's trades (spec 4.6; spec 7.2's recovery looks trades up by client_trade_id). */
export async function tradesRoutes(app: FastifyInstance, { trades }: { trades: TradesService }) {
  const tags = ['Trades'];

  app.get<{ Querystring: ListTradesQuery }>(
    '/trades',
    {
      schema: {
        tags,
        operationId: 'listTrades',
        summary: 'List trades, newest first (client_trade_id finds the trade of an executed quote)',
        querystring: ListTradesQuery,
        response: { 200: TradesPage, ...publicErrorResponses },
      },
    },
    async (request) => {
      const { rows, ...paging } = await trades.list(callerOf(request).platformCode, request.query);
      return { message: rows, ...paging };
    },
  );

  app.get<{ Params: TradeParams }>(
    '/trades/:trade_id',
    {
      schema: {
        tags,
        operationId: 'getTrade',
        summary: "A trade; another platform's trade → 403",
        params: TradeParams,
        response: { 200: TradeResponse, ...publicErrorResponses },
      },
    },
    async (request) => ({
      message: await trades.get(callerOf(request).platformCode, request.params.trade_id),
    }),
  );
}
