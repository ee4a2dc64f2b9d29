import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { unauthenticated } from '../../domain/errors.ts';
import '../request-context.ts';
import { repeatedHeader } from '../repeated-header.ts';
import { appliesToRegisteringScope } from './plugin-scope.ts';
import { assertParsableInput } from '../input-checks.ts';
import type { RefusalLog } from '../refusal-log.ts';

/** DESIGN §3: the operator API takes `Authorization: Bearer $SVC_ADMIN_TOKEN`, compared in constant time. */
async function adminAuth(
  app: FastifyInstance,
  options: { adminToken: string; refusals: RefusalLog },
): Promise<void> {
  const expected = createHash('sha256').update(options.adminToken).digest();
  app.addHook('onRequest', async (request) => {
    const problem = tokenProblem(request.raw.rawHeaders, request.headers.authorization, expected);
    if (problem === undefined) return;
    if (!options.refusals.atInfo('operator token', request.ip)) request.quietLog = true;
    throw unauthenticated(problem);
  });
  // The body is read as JSON, and its problems reported, only after the token check (input-checks.ts).
  app.addHook('preValidation', async (request) => {
    assertParsableInput(request);
  });
}

export const adminAuthPlugin = appliesToRegisteringScope('admin-auth', adminAuth);

/** What is wrong with a request's bearer token, or undefined when it is the operator's. */
function tokenProblem(
  rawHeaders: string[],
  authorization: string | undefined,
  expected: Buffer,
): string | undefined {
  // Node keeps the first of two Authorization lines: a right token then a wrong one was served (review).
  if (repeatedHeader(rawHeaders, ['authorization']))
    return 'header Authorization is given more than once (send it once)';
  const match = /^Bearer (.+)$/i.exec(authorization ?? '');
  if (!match) return 'missing bearer token';
  const given = createHash('sha256').update(match[1]!).digest();
  return timingSafeEqual(given, expected) ? undefined : 'invalid admin token';
}
