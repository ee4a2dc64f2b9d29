import type { FastifyInstance } from 'fastify';
import type { Static } from 'typebox';
import {
  AdminFundEvent,
  DepositAddressOwner,
  DepositAddressParams,
  FindDepositsQuery,
  RecordDepositBody,
  RecordedDepositResponse,
} from '../../contract/funding.schemas.ts';
import { Envelope, PagedEnvelope } from '../../contract/responses.ts';
import type { FundingService } from '../../domain/funding/funding.service.ts';
import { adminErrorResponses } from './admin-errors.ts';

/**
 * Operator API: POST /admin/deposits records an on-chain deposit to a deposit address, where a chain indexer
 * would call (DESIGN §1, §3). 201 with the new fund event; 200 with the first one when the same transaction
 * to the same address is reported again. GET finds fund events, and whose a deposit address is, for support.
 */
export async function adminDepositsRoutes(app: FastifyInstance, { funding }: { funding: FundingService }) {
  app.get<{ Querystring: FindDepositsQuery }>(
    '/deposits',
    {
      schema: {
        tags: ['Operator: deposits'],
        operationId: 'adminFindDeposits',
        summary:
          'Fund events of every platform by transaction id, deposit address or participant (at least one), newest first',
        querystring: FindDepositsQuery,
        response: { 200: PagedEnvelope(AdminFundEvent), ...adminErrorResponses },
      },
    },
    async (request) => {
      const { items, ...paging } = await funding.findForOperator(request.query);
      return { message: items, ...paging };
    },
  );

  app.get<{ Params: Static<typeof DepositAddressParams> }>(
    '/deposit_addresses/:address',
    {
      schema: {
        tags: ['Operator: deposits'],
        operationId: 'adminGetDepositAddress',
        summary: 'Whose deposit address it is: platform, participant, account label, network',
        params: DepositAddressParams,
        response: { 200: Envelope(DepositAddressOwner), ...adminErrorResponses },
      },
    },
    async (request) => ({ message: await funding.depositAddressOwner(request.params.address) }),
  );

  app.post<{ Body: RecordDepositBody }>(
    '/deposits',
    {
      schema: {
        tags: ['Operator: deposits'],
        operationId: 'adminRecordDeposit',
        summary: 'Record an on-chain deposit to a deposit address (what a chain indexer would call)',
        body: RecordDepositBody,
        response: { 200: RecordedDepositResponse, 201: RecordedDepositResponse, ...adminErrorResponses },
      },
    },
    async (request, reply) => {
      const { event, created } = await funding.recordDeposit(request.body);
      return reply.code(created ? 201 : 200).send({ message: event });
    },
  );
}
