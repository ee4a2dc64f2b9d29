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
        operationId: 'adminCreatePlatform',
        summary: 'Create a platform (its code is generated)',
        body: CreatePlatformBody,
        response: { 201: Envelope(Platform), ...adminErrorResponses },
      },
    },
    async (request, reply) => reply.code(201).send({ message: await platforms.create(request.body) }),
  );

  app.get(
    '/platforms',
    {
      schema: {
        tags,
        operationId: 'adminListPlatforms',
        summary: 'Every platform',
        response: { 200: Envelope(Type.Array(Platform)), ...adminErrorResponses },
      },
    },
    async () => ({
      message: await platforms.list(),
    }),
  );

  app.get<{ Params: Static<typeof PlatformCodeParams> }>(
    '/platforms/:code',
    {
      schema: {
        tags,
        operationId: 'adminGetPlatform',
        summary: 'A platform',
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
        operationId: 'adminUpdatePlatform',
        summary:
          "Change a platform's name, quote expiry, whether its RFQs may ask for their own window (quote_expiry_requests) or deposit fee; the fields left out stay as they are",
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
        operationId: 'adminSetIpAllowlist',
        summary: "Replace a platform's IP allow-list (empty: every address, in cert only)",
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
        operationId: 'adminCreateApiKey',
        summary: 'Issue an API key; its secret and passphrase are shown this once',
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
        operationId: 'adminListApiKeys',
        summary: "A platform's API keys (never their secrets), with when each was last used",
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
        operationId: 'adminRevokeApiKey',
        summary: 'Revoke an API key, on every instance at once',
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
