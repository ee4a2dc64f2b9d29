import type { FastifyInstance } from 'fastify';
import { Counter, Histogram, type Registry } from 'prom-client';
import { appliesToRegisteringScope } from './plugin-scope.ts';

/**
 * Prometheus request metrics (DESIGN §6), labelled by route pattern, never by raw URL. A process may serve
 * several apps on one registry (the public API and a separate operator listener, SVC_ADMIN_LISTEN): the
 * second one counts into the metrics the first registered, as prom-client refuses a name twice.
 */
export function requestMetrics(registry: Registry): { requests: Counter; latency: Histogram } {
  const requests =
    (registry.getSingleMetric('svc_http_requests_total') as Counter | undefined) ??
    new Counter({
      name: 'svc_http_requests_total',
      help: 'HTTP requests by method, route and status',
      labelNames: ['method', 'route', 'status'],
      registers: [registry],
    });
  const latency =
    (registry.getSingleMetric('svc_http_request_duration_seconds') as Histogram | undefined) ??
    new Histogram({
      name: 'svc_http_request_duration_seconds',
      help: 'HTTP request latency',
      labelNames: ['method', 'route'],
      // Up to the service's own bounds (5 s for a connection, 30 s for a statement or a request to arrive),
      // so that requests held by them are told apart rather than all in +Inf.
      buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30],
      registers: [registry],
    });
  return { requests, latency };
}

async function metrics(app: FastifyInstance, options: { registry: Registry }): Promise<void> {
  const { requests, latency } = requestMetrics(options.registry);
  app.addHook('onResponse', async (request, reply) => {
    const route = request.routeOptions.url ?? 'unmatched';
    requests.inc({ method: request.method, route, status: reply.statusCode });
    latency.observe({ method: request.method, route }, reply.elapsedTime / 1000);
  });
}

export const metricsPlugin = appliesToRegisteringScope('metrics', metrics);
