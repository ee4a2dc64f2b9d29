import type { FastifyInstance } from 'fastify';
import type { AppDeps } from '../../app.ts';
import { quotesRoutes } from './quotes.routes.ts';
import { tradesRoutes } from './trades.routes.ts';
import { accountsRoutes } from './accounts.routes.ts';
import { fundingRoutes } from './funding.routes.ts';
import { participantsRoutes } from './participants.routes.ts';

/**
 * Every authenticated public route module, registered inside the scope where the firewall, the rate limit,
 * authentication, the allow-list and (in cert) the simulator already ran. Add an area's routes here.
 */
export async function publicRoutes(app: FastifyInstance, deps: AppDeps): Promise<void> {
  const { services } = deps;
  await app.register(quotesRoutes, { quotes: services.quotes });
  await app.register(tradesRoutes, { trades: services.trades });
  await app.register(accountsRoutes, {
    customerAccounts: services.customerAccounts,
    tenants: services.tenants,
  });
  await app.register(fundingRoutes, { funding: services.funding });
  await app.register(participantsRoutes, { participants: services.participants, clock: deps.clock });
}
