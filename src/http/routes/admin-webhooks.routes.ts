import type { FastifyInstance } from 'fastify';
import type { Static } from 'typebox';
import { Envelope, NoFieldsBody, PagedEnvelope } from '../../contract/responses.ts';
import {
  NotificationParams,
  NotificationsQuery,
  PatchWebhookBody,
  PutWebhookBody,
  RedeliverSinceBody,
  RedeliverSinceResult,
  WebhookEndpoint,
  WebhookNotification,
  WebhookPlatformParams,
} from '../../contract/webhooks.schemas.ts';
import type { WebhooksService } from '../../domain/webhooks/webhooks.service.ts';
import { adminErrorResponses } from './admin-errors.ts';
import { bareBodyAsEmpty } from './optional-body.ts';

/** Operator API: webhook configuration, notifications with their attempts, redelivery (DESIGN §3). */
export async function adminWebhooksRoutes(app: FastifyInstance, { webhooks }: { webhooks: WebhooksService }) {
  const tags = ['Operator: webhooks'];

  app.put<{ Params: Static<typeof WebhookPlatformParams>; Body: PutWebhookBody }>(
    '/platforms/:code/webhook',
    {
      schema: {
        tags,
        operationId: 'adminPutWebhook',
        summary: "Configure a platform's webhook (URL, optional secret, payload types, enabled)",
        params: WebhookPlatformParams,
        body: PutWebhookBody,
        response: { 200: Envelope(WebhookEndpoint), ...adminErrorResponses },
      },
    },
    async (request) => ({ message: await webhooks.putEndpoint(request.params.code, request.body) }),
  );

  app.patch<{ Params: Static<typeof WebhookPlatformParams>; Body: PatchWebhookBody }>(
    '/platforms/:code/webhook',
    {
      schema: {
        tags,
        operationId: 'adminUpdateWebhook',
        summary: "Change some of a platform's webhook configuration; the fields left out stay as they are",
        params: WebhookPlatformParams,
        body: PatchWebhookBody,
        response: { 200: Envelope(WebhookEndpoint), ...adminErrorResponses },
      },
    },
    async (request) => ({ message: await webhooks.patchEndpoint(request.params.code, request.body) }),
  );

  app.get<{ Params: Static<typeof WebhookPlatformParams> }>(
    '/platforms/:code/webhook',
    {
      schema: {
        tags,
        operationId: 'adminGetWebhook',
        summary: "A platform's webhook configuration (the secret is never returned)",
        params: WebhookPlatformParams,
        response: { 200: Envelope(WebhookEndpoint), ...adminErrorResponses },
      },
    },
    async (request) => ({ message: await webhooks.getEndpoint(request.params.code) }),
  );

  app.get<{ Params: Static<typeof WebhookPlatformParams>; Querystring: NotificationsQuery }>(
    '/platforms/:code/notifications',
    {
      schema: {
        tags,
        operationId: 'adminListNotifications',
        summary: "A platform's notifications, newest first, each with every delivery attempt",
        params: WebhookPlatformParams,
        querystring: NotificationsQuery,
        response: { 200: PagedEnvelope(WebhookNotification), ...adminErrorResponses },
      },
    },
    async (request) => {
      const { items, ...paging } = await webhooks.listNotifications(request.params.code, request.query);
      return { message: items, ...paging };
    },
  );

  app.get<{ Params: Static<typeof NotificationParams> }>(
    '/notifications/:id',
    {
      schema: {
        tags,
        operationId: 'adminGetNotification',
        summary: 'One notification with every delivery attempt',
        params: NotificationParams,
        response: { 200: Envelope(WebhookNotification), ...adminErrorResponses },
      },
    },
    async (request) => ({ message: await webhooks.getNotification(request.params.id) }),
  );

  app.post<{ Params: Static<typeof NotificationParams> }>(
    '/notifications/:id/redeliver',
    {
      schema: {
        tags,
        operationId: 'adminRedeliverNotification',
        summary: 'Deliver a notification again (same notification id), from the top of the retry schedule',
        params: NotificationParams,
        body: NoFieldsBody,
        response: { 200: Envelope(WebhookNotification), ...adminErrorResponses },
      },
      preValidation: bareBodyAsEmpty,
    },
    async (request) => ({ message: await webhooks.redeliver(request.params.id) }),
  );

  app.post<{ Params: Static<typeof WebhookPlatformParams>; Body: RedeliverSinceBody }>(
    '/platforms/:code/redeliver',
    {
      schema: {
        tags,
        operationId: 'adminRedeliverSince',
        summary: 'Deliver again every notification of the platform recorded since a time (epoch ms)',
        params: WebhookPlatformParams,
        body: RedeliverSinceBody,
        response: { 200: Envelope(RedeliverSinceResult), ...adminErrorResponses },
      },
    },
    async (request) => {
      const { failure, ...answer } = await webhooks.redeliverSince(request.params.code, request.body);
      // Answered 200 with what the call did: the failure that stopped it is logged here, as the error handler
      // would have (review: it reached no log).
      if (failure) request.log.warn({ err: failure }, `redelivery stopped early: ${answer.interrupted}`);
      return { message: answer };
    },
  );
}
