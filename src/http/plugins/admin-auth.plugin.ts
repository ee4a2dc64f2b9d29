import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { unauthenticated } from '../../domain/errors.ts';
import '../request-context.ts';
import { repeatedHeader } from '../repeated-header.ts';
import { appliesToRegisteringScope } from './plugin-scope.ts';
import { assertParsableInput } from '../input-checks.ts';

/** DESIGN §3: the operator API takes `Authorization: Bearer $SVC_ADMIN_TOKEN`, compared in constant time. */
async function adminAuth(app: FastifyInstance, options: { adminToken: string }): Promise<void> {
  const expected = createHash('sha256').update(options.adminToken).digest();
  app.addHook('onRequest', async (request) => {
    // Node keeps the first of two Authorization lines: a right token then a wrong one was served (review).
    if (repeatedHeader(request.raw.rawHeaders, ['authorization']))
      throw unauthenticated('header Authorization is given more than once (send it once)');
    const header = request.headers.authorization ?? '';
    const match = /^Bearer (.+)$/i.exec(header);
    if (!match) throw unauthenticated('missing bearer token');
    const given = createHash('sha256').update(match[1]!).digest();
    if (!timingSafeEqual(given, expected)) throw unauthenticated('invalid admin token');
  });
  // The body is read as JSON, and its problems reported, only after the token check (input-checks.ts).
  app.addHook('preValidation', async (request) => {
    assertParsableInput(request);
  });
}

export const adminAuthPlugin = appliesToRegisteringScope('admin-auth', adminAuth);
