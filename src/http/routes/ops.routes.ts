import type { FastifyInstance } from 'fastify';
import type { Registry } from 'prom-client';
import { sql } from 'kysely';
import type { Db } from '../../store/database.ts';

export interface ReadinessCheck {
  name: string;
  check(): Promise<boolean>;
}

/** DESIGN §6: liveness, readiness (database and, when configured, Redis) and Prometheus metrics. */
export async function opsRoutes(
  app: FastifyInstance,
  options: { db: Db; registry: Registry; readiness: ReadinessCheck[] },
) {
  app.get('/healthz', { schema: { hide: true } }, async () => ({ status: 'ok' }));

  app.get('/readyz', { schema: { hide: true } }, async (_request, reply) => {
    const checks: Record<string, boolean> = {};
    checks.database = await sql`select 1`
      .execute(options.db)
      .then(() => true)
      .catch(() => false);
    for (const extra of options.readiness) checks[extra.name] = await extra.check().catch(() => false);
    const ready = Object.values(checks).every(Boolean);
    return reply.code(ready ? 200 : 503).send({ status: ready ? 'ready' : 'not ready', checks });
  });

  app.get('/metrics', { schema: { hide: true } }, async (_request, reply) => {
    return reply.type(options.registry.contentType).send(await options.registry.metrics());
  });
}
