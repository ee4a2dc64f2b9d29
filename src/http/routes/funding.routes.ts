import type { FastifyInstance } from 'fastify';
import { Type } from 'typebox';
import {
  ClientAuthTokenBody,
  ClientAuthTokenResponse,
  FundQuoteResponse,
  FundRfqBody,
  FundTransactionsQuery,
  FundTransactionsResponse,
  RevokeClientAuthTokenBody,
} from '../../contract/funding.schemas.ts';
import { publicErrorResponses } from '../../contract/responses.ts';
import type { FundingService } from '../../domain/funding/funding.service.ts';
import { callerOf } from '../request-context.ts';

/** Account funding (spec 4.3–4.5): SDK tokens, fund quotes and fund events of the calling platform. */
export async function fundingRoutes(app: FastifyInstance, { funding }: { funding: FundingService }) {
  const tags = ['Account funding'];

  app.post<{ Body: ClientAuthTokenBody }>(
    '/client_auth_token',
    {
      schema: {
        tags,
        operationId: 'createClientToken',
        summary: 'Create a JWT for the Account Funding SDK (with `fwc` it opens a funding session)',
        body: ClientAuthTokenBody,
        response: { 201: ClientAuthTokenResponse, ...publicErrorResponses },
      },
    },
    async (request, reply) =>
      reply
        .code(201)
        .send({ message: await funding.issueClientToken(callerOf(request).platformCode, request.body) }),
  );

  app.post<{ Body: RevokeClientAuthTokenBody }>(
    '/revoke_auth_token',
    {
      schema: {
        tags,
        operationId: 'revokeClientToken',
        summary: 'Revoke an Account Funding SDK token',
        body: RevokeClientAuthTokenBody,
        response: {
          204: Type.Null({ description: 'Revoked; empty body' }),
          ...publicErrorResponses,
        },
      },
    },
    async (request, reply) => {
      await funding.revokeClientToken(callerOf(request).platformCode, request.body.token);
      return reply.code(204).send();
    },
  );

  app.post<{ Body: FundRfqBody }>(
    '/fund/rfq',
    {
      schema: {
        tags,
        operationId: 'requestFundQuote',
        summary: 'Request a fund quote and the deposit address (opens a funding session)',
        body: FundRfqBody,
        response: { 200: FundQuoteResponse, ...publicErrorResponses },
      },
    },
    async (request) => ({
      message: await funding.requestFundQuote(callerOf(request).platformCode, request.body),
    }),
  );

  app.get<{ Querystring: FundTransactionsQuery }>(
    '/fund/transactions',
    {
      schema: {
        tags,
        operationId: 'listFundTransactions',
        summary: 'List fund events, newest first',
        querystring: FundTransactionsQuery,
        response: { 200: FundTransactionsResponse, ...publicErrorResponses },
      },
    },
    async (request) => funding.listFundTransactions(callerOf(request).platformCode, request.query),
  );
}
