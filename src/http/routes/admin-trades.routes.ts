import type { FastifyInstance } from 'fastify';

import {
  AdminListTradesQuery,
  AdminTradeResponse,
  AdminTradesPage,
  AdvanceTradeBody,
  BookTradeBody,
  TradeParams,
} from '../../contract/trades.schemas.ts';
import type { TradesService } from '../../domain/trades/trades.service.ts';
import { adminErrorResponses } from './admin-errors.ts';
import { bareBodyAsEmpty } from './optional-body.ts';

/** Operator API for trades (DESIGN §3): book one directly, show one, move one to its next state now. */
export async function adminTradesRoutes(app: FastifyInstance, { trades }: { trades: TradesService }) {
  const tags = ['Operator: trades'];

  app.post<{ Body: BookTradeBody }>(
    '/trades',
    {
      schema: {
        tags,
        operationId: 'adminBookTrade',
        summary:
          'Book a trade directly (net_settlement: true books an allocation trade, which sends no trade_status_changed; its balance moves still notify)',
        body: BookTradeBody,
        response: { 201: AdminTradeResponse, ...adminErrorResponses },
      },
    },
    async (request, reply) => reply.code(201).send({ message: await trades.bookByOperator(request.body) }),
  );

  app.get<{ Querystring: AdminListTradesQuery }>(
    '/trades',
    {
      schema: {
        tags,
        operationId: 'adminListTrades',
        summary:
          "A platform's trades, newest first, optionally of a party (owner or counterparty), in a state, or by " +
          'client_trade_id (a quote id finds the trade of that quote)',
        querystring: AdminListTradesQuery,
        response: { 200: AdminTradesPage, ...adminErrorResponses },
      },
    },
    async (request) => {
      const { items, ...paging } = await trades.listForOperator(request.query);
      return { message: items, ...paging };
    },
  );

  app.get<{ Params: TradeParams }>(
    '/trades/:trade_id',
    {
      schema: {
        tags,
        operationId: 'adminGetTrade',
        summary: "Any platform's trade, with its settlement flag and withdrawal request",
        params: TradeParams,
        response: { 200: AdminTradeResponse, ...adminErrorResponses },
      },
    },
    async (request) => ({ message: await trades.getForOperator(request.params.trade_id) }),
  );

  app.post<{ Params: TradeParams; Body: AdvanceTradeBody | undefined }>(
    '/trades/:trade_id/advance',
    {
      schema: {
        tags,
        operationId: 'adminAdvanceTrade',
        summary:
          'Move a trade to its next state now (accepted → active → terminated); 409 once terminated, or when ' +
          'it is no longer in the state `from` names',
        params: TradeParams,
        body: AdvanceTradeBody,
        response: { 200: AdminTradeResponse, ...adminErrorResponses },
      },
      // The body is optional (`from` is): a bare POST, as curl sends it, advances as `{}` does.
      preValidation: bareBodyAsEmpty,
    },
    async (request) => ({
      message: await trades.advance(request.params.trade_id, request.body?.from),
    }),
  );
}
