import type { FastifyInstance } from 'fastify';
import { Type, type Static } from 'typebox';
import {
  CreateParticipantBody,
  FindParticipantsQuery,
  Participant,
  ParticipantParams,
  UpdateParticipantBody,
} from '../../contract/admin.schemas.ts';
import { CreateCustomerAccountBody } from '../../contract/admin.schemas.ts';
import { CustomerAccountDetails } from '../../contract/accounts.schemas.ts';
import { Envelope } from '../../contract/responses.ts';
import type { CustomerAccountsService } from '../../domain/accounts/customer-accounts.service.ts';
import type { ParticipantsService } from '../../domain/participants/participants.service.ts';
import { adminErrorResponses } from './admin-errors.ts';

/** Operator API: direct onboarding, status changes and synchronous customer accounts (DESIGN §3). */
export async function adminParticipantsRoutes(
  app: FastifyInstance,
  {
    participants,
    customerAccounts,
  }: { participants: ParticipantsService; customerAccounts: CustomerAccountsService },
) {
  const tags = ['Operator: participants'];

  app.post<{ Body: Static<typeof CreateParticipantBody> }>(
    '/participants',
    {
      schema: {
        tags,
        operationId: 'adminCreateParticipant',
        summary: 'Create a participant of a platform',
        body: CreateParticipantBody,
        response: { 201: Envelope(Participant), ...adminErrorResponses },
      },
    },
    async (request, reply) => reply.code(201).send({ message: await participants.create(request.body) }),
  );

  app.get<{ Querystring: Static<typeof FindParticipantsQuery> }>(
    '/participants',
    {
      schema: {
        tags,
        operationId: 'adminFindParticipants',
        summary: 'The participants of every platform with this email (any letter case)',
        querystring: FindParticipantsQuery,
        response: { 200: Envelope(Type.Array(Participant)), ...adminErrorResponses },
      },
    },
    async (request) => ({ message: await participants.findEverywhereByEmail(request.query.email) }),
  );

  app.get<{ Params: Static<typeof ParticipantParams> }>(
    '/participants/:code',
    {
      schema: {
        tags,
        operationId: 'adminGetParticipant',
        summary: "Any platform's participant",
        params: ParticipantParams,
        response: { 200: Envelope(Participant), ...adminErrorResponses },
      },
    },
    async (request) => ({ message: await participants.get(request.params.code) }),
  );

  app.patch<{ Params: Static<typeof ParticipantParams>; Body: Static<typeof UpdateParticipantBody> }>(
    '/participants/:code',
    {
      schema: {
        tags,
        operationId: 'adminUpdateParticipant',
        summary: "Set a participant's status (and its reason code)",
        params: ParticipantParams,
        body: UpdateParticipantBody,
        response: { 200: Envelope(Participant), ...adminErrorResponses },
      },
    },
    async (request) => ({
      message: await participants.setStatus(
        request.params.code,
        request.body.status,
        request.body.reason_code,
      ),
    }),
  );

  app.post<{ Body: Static<typeof CreateCustomerAccountBody> }>(
    '/customer_accounts',
    {
      schema: {
        tags: ['Operator: accounts'],
        operationId: 'adminCreateCustomerAccount',
        summary: 'Create a customer account synchronously',
        body: CreateCustomerAccountBody,
        response: { 201: Envelope(CustomerAccountDetails), ...adminErrorResponses },
      },
    },
    async (request, reply) => reply.code(201).send({ message: await customerAccounts.create(request.body) }),
  );
}
