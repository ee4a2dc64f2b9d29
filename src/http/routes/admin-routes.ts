import type { FastifyInstance } from 'fastify';
import type { AppDeps } from '../../app.ts';
import { adminDepositsRoutes } from './admin-deposits.routes.ts';
import { adminLedgerRoutes } from './admin-ledger.routes.ts';
import { adminParticipantsRoutes } from './admin-participants.routes.ts';
import { adminPlatformsRoutes } from './admin-platforms.routes.ts';
import { adminRateLimitsRoutes } from './admin-rate-limits.routes.ts';
import { adminTradesRoutes } from './admin-trades.routes.ts';
import { adminWebhooksRoutes } from './admin-webhooks.routes.ts';

/** Every operator route module, registered under /admin behind the bearer token. Add an area's routes here. */
export async function adminRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  const { services } = deps;
  await app.register(adminPlatformsRoutes, { platforms: services.platforms });
  await app.register(adminParticipantsRoutes, {
    participants: services.participants,
    customerAccounts: services.customerAccounts,
  });
  await app.register(adminLedgerRoutes, { prices: services.prices, balances: services.balances });
  await app.register(adminTradesRoutes, { trades: services.trades });
  await app.register(adminDepositsRoutes, { funding: services.funding });
  if (deps.rateLimiter) await app.register(adminRateLimitsRoutes, { limiter: deps.rateLimiter });
  await app.register(adminWebhooksRoutes, { webhooks: services.webhooks });
}
