import type { FastifyInstance } from 'fastify';
import {
  CreateCustomerHeaders,
  CreateCustomerResponse,
  ListParticipantsQuery,
  ListParticipantsResponse,
  ParticipantByEmailResponse,
  ParticipantEmailParams,
  PostCustomerBody,
} from '../../contract/participants.schemas.ts';
import { customerBodyValidator } from '../../contract/participants.validation.ts';
import { publicErrorResponses, conflictResponses } from '../../contract/responses.ts';
import type { ParticipantsService } from '../../domain/participants/participants.service.ts';
import type { Clock } from '../../lib/clock.ts';
import { callerOf } from '../request-context.ts';
import { REQUEST_ID_HEADER } from '../../contract/wire-values.ts';

/** Customer onboarding and participant look-ups (spec 4.6, 7.2 last row, 7.3; wire-contract §7, §9). */
export async function participantsRoutes(
  app: FastifyInstance,
  { participants, clock }: { participants: ParticipantsService; clock: Clock },
) {
  const tags = ['Participants'];
  const customerBody = customerBodyValidator(() => clock.now());

  app.post<{ Body: PostCustomerBody }>(
    '/participants/customers/new',
    {
      schema: {
        tags,
        operationId: 'createCustomer',
        summary: 'Create a customer; X-REQUEST-ID makes a repeat return the original answer (spec 7.3)',
        headers: CreateCustomerHeaders,
        body: PostCustomerBody,
        response: {
          201: CreateCustomerResponse,
          ...publicErrorResponses,
          ...conflictResponses,
        },
      },
      // The body is one of the vendor's variants, with conditional and clock-dependent rules: one check
      // reports every bad field of the closest variant (src/contract/participants.validation.ts). Its headers
      // are the app's to check, as every route's (review: a compiler of its own here did not coerce alike).
      validatorCompiler: (part) => (part.httpPart === 'body' ? customerBody : app.validatorCompiler!(part)),
    },
    async (request, reply) => {
      const header = request.headers[REQUEST_ID_HEADER];
      const { customer } = await participants.createCustomer({
        platformCode: callerOf(request).platformCode,
        body: request.body,
        requestId: Array.isArray(header) ? header.join(', ') : header,
      });
      // A replay is the original 201 again (wire-contract §7).
      return reply.code(201).send({ message: customer });
    },
  );

  app.get<{ Querystring: ListParticipantsQuery }>(
    '/participants',
    {
      schema: {
        tags,
        operationId: 'listParticipants',
        summary: "The platform's customers, oldest first; filters participant_code, email, status",
        querystring: ListParticipantsQuery,
        response: { 200: ListParticipantsResponse, ...publicErrorResponses },
      },
    },
    async (request) => participants.list(callerOf(request).platformCode, request.query),
  );

  app.get<{ Params: { email: string } }>(
    '/participants/:email',
    {
      schema: {
        tags,
        operationId: 'getParticipantByEmail',
        summary: "A participant by email (spec 7.2: did the creation happen?); another platform's → 403",
        params: ParticipantEmailParams,
        response: { 200: ParticipantByEmailResponse, ...publicErrorResponses },
      },
    },
    async (request) => ({
      message: await participants.findByEmail(callerOf(request).platformCode, request.params.email),
    }),
  );
}
