import type { FastifyInstance } from 'fastify';
import {
  AddTenantBody,
  CreateCustomerAccountRequest,
  CustomerAccountDetails,
  DetailsQuery,
  INCLUDE_PENDING_TENANT_CHANGES,
  ListAccountsQuery,
  ListAccountsResponse,
  TenantParams,
  ZrnParams,
} from '../../contract/accounts.schemas.ts';
import {
  Accepted,
  Envelope,
  publicErrorResponses,
  conflictResponses,
  NoFieldsBody,
} from '../../contract/responses.ts';
import type { CustomerAccountsService } from '../../domain/accounts/customer-accounts.service.ts';
import type { TenantsService } from '../../domain/accounts/tenants.service.ts';
import { callerOf } from '../request-context.ts';
import { bareBodyAsEmpty } from './optional-body.ts';

/**
 * Accounts and tenants (issue 5; spec 4.1, 4.2; wire-contract §3, §4): balance accounts, customer account
 * details, asynchronous account creation and tenant changes. Accepted-for-later operations answer 202 `{}`.
 */
export async function accountsRoutes(
  app: FastifyInstance,
  { customerAccounts, tenants }: { customerAccounts: CustomerAccountsService; tenants: TenantsService },
) {
  const tags = ['Accounts'];

  app.get<{ Querystring: ListAccountsQuery }>(
    '/accounts',
    {
      schema: {
        tags,
        operationId: 'listAccounts',
        summary: 'List balance accounts',
        querystring: ListAccountsQuery,
        response: { 200: ListAccountsResponse, ...publicErrorResponses },
      },
    },
    async (request) => {
      const result = await customerAccounts.listBalanceAccounts(
        callerOf(request).platformCode,
        request.query,
      );
      return { message: result.accounts, page: result.page, total_pages: result.totalPages };
    },
  );

  app.post<{ Body: CreateCustomerAccountRequest }>(
    '/accounts',
    {
      schema: {
        tags,
        operationId: 'createCustomerAccount',
        summary: 'Create customer account (asynchronous)',
        body: CreateCustomerAccountRequest,
        response: { 202: Accepted, ...publicErrorResponses, ...conflictResponses },
      },
    },
    async (request, reply) => {
      await customerAccounts.requestCreation(callerOf(request).platformCode, request.body);
      return reply.code(202).send({});
    },
  );

  app.get<{ Params: ZrnParams; Querystring: DetailsQuery }>(
    '/accounts/:zrn/details',
    {
      schema: {
        tags,
        operationId: 'getCustomerAccountDetails',
        summary: 'Get customer account details',
        params: ZrnParams,
        querystring: DetailsQuery,
        response: { 200: Envelope(CustomerAccountDetails), ...publicErrorResponses },
      },
    },
    async (request) => ({
      message: await customerAccounts.details(callerOf(request).platformCode, request.params.zrn, {
        participantCode: request.query.participant_code,
        withPending: request.query.include === INCLUDE_PENDING_TENANT_CHANGES,
      }),
    }),
  );

  app.post<{ Params: ZrnParams; Body: AddTenantBody }>(
    '/accounts/:zrn/tenants',
    {
      schema: {
        tags,
        operationId: 'addTenant',
        summary: 'Add tenant to customer account (asynchronous)',
        params: ZrnParams,
        body: AddTenantBody,
        response: { 202: Accepted, ...publicErrorResponses, ...conflictResponses },
      },
    },
    async (request, reply) => {
      await tenants.add(callerOf(request).platformCode, request.params.zrn, request.body.participant_code);
      return reply.code(202).send({});
    },
  );

  app.delete<{ Params: TenantParams }>(
    '/accounts/:zrn/tenants/:tenant',
    {
      schema: {
        tags,
        operationId: 'removeTenant',
        summary: 'Remove tenant from customer account (asynchronous)',
        params: TenantParams,
        // None, or `{}` (wire-contract §1 signs a bodyless DELETE as `{}`); a field is refused by name, as on every
        // action that takes none (probe: `{"anything":"goes"}` removed the tenant all the same).
        body: NoFieldsBody,
        response: { 202: Accepted, ...publicErrorResponses, ...conflictResponses },
      },
      preValidation: bareBodyAsEmpty,
    },
    async (request, reply) => {
      await tenants.remove(callerOf(request).platformCode, request.params.zrn, request.params.tenant);
      return reply.code(202).send({});
    },
  );
}
