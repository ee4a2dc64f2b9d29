import type { FastifyInstance } from 'fastify';
import type { Registry } from 'prom-client';
import { within } from '../../lib/within.ts';
import type { Store } from '../../store/database.ts';

export interface ReadinessCheck {
  name: string;
  check(): Promise<boolean>;
  /**
   * False for a dependency the service can do without for a while: it is reported, and makes the answer
   * "degraded", but not 503. Redis is such a one: without it the rate limit falls back to memory
   * (DESIGN §5), and a 503 would make a load balancer pull every instance during a Redis outage.
   */
  required?: boolean;
}

/**
 * A check that does not answer within this has failed. A dependency that stopped answering without closing its
 * connections would otherwise hold the probe past a load balancer's probe timeout (typically 2 to 5 s), which
 * then sees no answer rather than a 503. (The database's probe bounds itself alike: Store.probe.)
 */
const READINESS_TIMEOUT_MS = 2_000;

interface Readiness {
  ready: boolean;
  status: 'ready' | 'degraded' | 'not ready' | 'draining';
  checks: Record<string, boolean>;
}

/** DESIGN §6: liveness, readiness (database and, when configured, Redis) and Prometheus metrics. */
export async function opsRoutes(
  app: FastifyInstance,
  options: {
    store: Pick<Store, 'probe'>;
    registry: Registry;
    readiness: ReadinessCheck[];
    draining?: () => boolean;
  },
) {
  app.get('/healthz', { schema: { hide: true } }, async () => ({ status: 'ok' }));

  // Probes that arrive while a check runs share it. /readyz is public and behind no limiter (load balancers
  // call it from their own addresses), and each check costs a database statement and a Redis round trip:
  // a flood of concurrent probes is one check at a time, not one each. (An answer is never reused after its
  // check: a probe right after an outage begins must see it.)
  let running: Promise<Readiness> | null = null;
  app.get('/readyz', { schema: { hide: true } }, async (_request, reply) => {
    // Stopping: no longer a target, whatever the dependencies say.
    if (options.draining?.()) return reply.code(503).send({ status: 'draining', checks: {} });
    running ??= checkReadiness().finally(() => {
      running = null;
    });
    const { ready, status, checks } = await running;
    return reply.code(ready ? 200 : 503).send({ status, checks });
  });

  // Every check at once, each bounded by READINESS_TIMEOUT_MS, so the answer comes within it: one after the
  // other, a silent database and a silent Redis took 3 s (review).
  async function checkReadiness(): Promise<Readiness> {
    const all: ReadinessCheck[] = [
      { name: 'database', check: () => options.store.probe().then(() => true) },
      ...options.readiness,
    ];
    const results = await Promise.all(
      all.map((c) =>
        within(c.check(), READINESS_TIMEOUT_MS).then(
          (ok) => ok,
          () => false,
        ),
      ),
    );
    const checks: Record<string, boolean> = {};
    let ready = true;
    let degraded = false;
    all.forEach((c, i) => {
      const ok = results[i]!;
      checks[c.name] = ok;
      if (!ok && c.required !== false) ready = false;
      if (!ok && c.required === false) degraded = true;
    });
    return { ready, status: !ready ? 'not ready' : degraded ? 'degraded' : 'ready', checks };
  }

  app.get('/metrics', { schema: { hide: true } }, async (_request, reply) => {
    return reply.type(options.registry.contentType).send(await options.registry.metrics());
  });
}
