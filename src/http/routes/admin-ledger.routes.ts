import type { FastifyInstance } from 'fastify';
import { Type, type Static } from 'typebox';
import {
  AdjustBalanceBody,
  BalanceAdjustment,
  HeldBalance,
  ListBalancesQuery,
  Price,
  SetPricesBody,
} from '../../contract/admin.schemas.ts';
import { Envelope } from '../../contract/responses.ts';
import type { BalancesService } from '../../domain/balances/balances.service.ts';
import type { PricesService } from '../../domain/prices/prices.service.ts';
import { adminErrorResponses } from './admin-errors.ts';

/** Operator API: the price source and balance adjustments (DESIGN §3). */
export async function adminLedgerRoutes(
  app: FastifyInstance,
  { prices, balances }: { prices: PricesService; balances: BalancesService },
) {
  app.post<{ Body: Static<typeof SetPricesBody> }>(
    '/prices',
    {
      schema: {
        tags: ['Operator: prices'],
        operationId: 'adminSetPrices',
        summary: 'Set the prices that quotes and fund rates are made from (at most 1,000 pairs)',
        body: SetPricesBody,
        response: { 200: Envelope(Type.Array(Price)), ...adminErrorResponses },
      },
    },
    async (request) => ({ message: await prices.set(request.body.pairs) }),
  );

  app.get(
    '/prices',
    {
      schema: {
        tags: ['Operator: prices'],
        operationId: 'adminListPrices',
        summary: 'The prices that quotes and fund rates are made from',
        response: { 200: Envelope(Type.Array(Price)), ...adminErrorResponses },
      },
    },
    async () => ({
      message: await prices.list(),
    }),
  );

  app.get<{ Querystring: Static<typeof ListBalancesQuery> }>(
    '/balances',
    {
      schema: {
        tags: ['Operator: balances'],
        operationId: 'adminGetBalances',
        summary: "A participant's balances, each with what unsettled trades will pay from it",
        querystring: ListBalancesQuery,
        response: { 200: Envelope(Type.Array(HeldBalance)), ...adminErrorResponses },
      },
    },
    async (request) => ({ message: await balances.list(request.query) }),
  );

  app.post<{ Body: Static<typeof AdjustBalanceBody> }>(
    '/balances',
    {
      schema: {
        tags: ['Operator: balances'],
        operationId: 'adminAdjustBalance',
        summary:
          'Credit or debit a balance (a recorded movement, notified for available and collateral accounts)',
        body: AdjustBalanceBody,
        response: { 200: Envelope(BalanceAdjustment), ...adminErrorResponses },
      },
    },
    async (request) => ({ message: await balances.adjust(request.body) }),
  );
}
