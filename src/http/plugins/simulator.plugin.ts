import type { FastifyInstance } from 'fastify';
import { invalid } from '../../domain/errors.ts';
import { sendUnavailable } from '../error-handler.ts';
import { appliesToRegisteringScope } from './plugin-scope.ts';
import { SIMULATOR_SCENARIO_HEADER } from '../../contract/wire-values.ts';

/**
 * wire-contract §8: in cert, X-Simulator-Scenario rehearses the error paths of spec part 7.
 * `error_5xx` fail before the handler runs; `error_502_after`/`error_504_after` let the handler do and
 * commit its work, then replace the answer with 502/504 (the indeterminate case). Ignored in prod.
 */
export const SIMULATOR_SCENARIOS = [
  'error_500',
  'error_502',
  'error_503',
  'error_504',
  'error_502_after',
  'error_504_after',
] as const;
type Scenario = (typeof SIMULATOR_SCENARIOS)[number];

const BODIES: Record<number, object> = {
  500: { error: 'Internal Server Error' },
  502: { error: 'Bad Gateway' },
  504: { error: 'Gateway Timeout' },
};

async function simulator(app: FastifyInstance): Promise<void> {
  app.addHook('preHandler', async (request, reply) => {
    const raw = request.headers[SIMULATOR_SCENARIO_HEADER];
    if (raw === undefined) return;
    const scenario = (Array.isArray(raw) ? raw[0] : raw) as Scenario;
    if (!SIMULATOR_SCENARIOS.includes(scenario)) {
      throw invalid(`X-Simulator-Scenario: must be one of ${SIMULATOR_SCENARIOS.join(', ')}`);
    }
    if (scenario.endsWith('_after')) return;
    const status = Number(scenario.slice('error_'.length));
    request.simulated = scenario;
    if (status === 503) return sendUnavailable(reply);
    return reply.code(status).send(BODIES[status]);
  });

  app.addHook('onSend', async (request, reply, payload) => {
    const raw = request.headers[SIMULATOR_SCENARIO_HEADER];
    const scenario = Array.isArray(raw) ? raw[0] : raw;
    if (scenario !== 'error_502_after' && scenario !== 'error_504_after') return payload;
    if (reply.statusCode >= 400) return payload;
    const status = scenario === 'error_502_after' ? 502 : 504;
    request.simulated = scenario;
    reply.code(status).type('application/json; charset=utf-8');
    return JSON.stringify(BODIES[status]);
  });
}

export const simulatorPlugin = appliesToRegisteringScope('simulator', simulator);
