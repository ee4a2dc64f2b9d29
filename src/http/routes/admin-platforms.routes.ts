import type { FastifyInstance } from 'fastify';
import type { Static } from 'typebox';
import { Type } from 'typebox';
import {
  AllowlistBody,
  ApiKeyParams,
  ApiKeySummary,
  CreatePlatformBody,
  IssuedApiKey,
  Platform,
  PlatformCodeParams,
  UpdatePlatformBody,
} from '../../contract/admin.schemas.ts';
import { Envelope, NoFieldsBody } from '../../contract/responses.ts';
import type { PlatformsService } from '../../domain/platforms/platforms.service.ts';
import { adminErrorResponses } from './admin-errors.ts';
import { bareBodyAsEmpty } from './optional-body.ts';

/** Operator API: platforms, API keys and IP allow-lists (DESIGN §3). */
export async function adminPlatformsRoutes(
  app: FastifyInstance,
  { platforms }: { platforms: PlatformsService },
) {
  const tags = ['Operator: platforms'];

  app.post<{ Body: Static<typeof CreatePlatformBody> }>(
    '/platforms',
    {
      schema: {
        tags,
        body: CreatePlatformBody,
        response: { 201: Envelope(Platform), ...adminErrorResponses },
      },
    },
    async (request, reply) => reply.code(201).send({ message: await platforms.create(request.body) }),
  );

  app.get(
    '/platforms',
    { schema: { tags, response: { 200: Envelope(Type.Array(Platform)), ...adminErrorResponses } } },
    async () => ({
      message: await platforms.list(),
    }),
  );

  app.get<{ Params: Static<typeof PlatformCodeParams> }>(
    '/platforms/:code',
    {
      schema: {
        tags,
        params: PlatformCodeParams,
        response: { 200: Envelope(Platform), ...adminErrorResponses },
      },
    },
    async (request) => ({ message: await platforms.get(request.params.code) }),
  );

  app.patch<{ Params: Static<typeof PlatformCodeParams>; Body: Static<typeof UpdatePlatformBody> }>(
    '/platforms/:code',
    {
      schema: {
        tags,
        params: PlatformCodeParams,
        body: UpdatePlatformBody,
        response: { 200: Envelope(Platform), ...adminErrorResponses },
      },
    },
    async (request) => ({ message: await platforms.update(request.params.code, request.body) }),
  );

  app.put<{ Params: Static<typeof PlatformCodeParams>; Body: Static<typeof AllowlistBody> }>(
    '/platforms/:code/ip_allowlist',
    {
      schema: {
        tags,
        params: PlatformCodeParams,
        body: AllowlistBody,
        response: { 200: Envelope(Platform), ...adminErrorResponses },
      },
    },
    async (request) => ({ message: await platforms.setAllowlist(request.params.code, request.body.cidrs) }),
  );

  app.post<{ Params: Static<typeof PlatformCodeParams> }>(
    '/platforms/:code/api_keys',
    {
      schema: {
        tags,
        params: PlatformCodeParams,
        body: NoFieldsBody,
        response: { 201: Envelope(IssuedApiKey), ...adminErrorResponses },
      },
      preValidation: bareBodyAsEmpty,
    },
    async (request, reply) =>
      reply.code(201).send({ message: await platforms.createApiKey(request.params.code) }),
  );

  app.get<{ Params: Static<typeof PlatformCodeParams> }>(
    '/platforms/:code/api_keys',
    {
      schema: {
        tags,
        params: PlatformCodeParams,
        response: { 200: Envelope(Type.Array(ApiKeySummary)), ...adminErrorResponses },
      },
    },
    async (request) => ({ message: await platforms.listApiKeys(request.params.code) }),
  );

  app.delete<{ Params: Static<typeof ApiKeyParams> }>(
    '/api_keys/:api_key',
    {
      schema: {
        tags,
        params: ApiKeyParams,
        // A body's fields are refused by name, as on every action (probe: `{"x":1}` revoked the key all the same).
        body: NoFieldsBody,
        response: {
          200: Envelope(
            Type.Object({ api_key: Type.String(), platform_code: Type.String(), revoked_at: Type.Integer() }),
          ),
          ...adminErrorResponses,
        },
      },
      preValidation: bareBodyAsEmpty,
    },
    async (request) => ({ message: await platforms.revokeApiKey(request.params.api_key) }),
  );
}
