import type { FastifyInstance } from 'fastify';
import { RecordDepositBody, RecordedDepositResponse } from '../../contract/funding.schemas.ts';
import type { FundingService } from '../../domain/funding/funding.service.ts';
import { adminErrorResponses } from './admin-errors.ts';

/**
 * Operator API: POST /admin/deposits records an on-chain deposit to a deposit address, where a chain indexer
 * would call (DESIGN §1, §3). 201 with the new fund event; 200 with the first one when the same transaction
 * to the same address is reported again.
 */
export async function adminDepositsRoutes(app: FastifyInstance, { funding }: { funding: FundingService }) {
  app.post<{ Body: RecordDepositBody }>(
    '/deposits',
    {
      schema: {
        tags: ['Operator: deposits'],
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
