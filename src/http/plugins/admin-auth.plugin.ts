import { createHash, timingSafeEqual } from 'node:crypto';
import type { FastifyInstance } from 'fastify';
import { invalid, unauthenticated } from '../../domain/errors.ts';
import '../request-context.ts';
import { appliesToRegisteringScope } from './plugin-scope.ts';

/** DESIGN §3: the operator API takes `Authorization: Bearer $SVC_ADMIN_TOKEN`, compared in constant time. */
async function adminAuth(app: FastifyInstance, options: { adminToken: string }): Promise<void> {
  const expected = createHash('sha256').update(options.adminToken).digest();
  app.addHook('onRequest', async (request) => {
    const header = request.headers.authorization ?? '';
    const match = /^Bearer (.+)$/i.exec(header);
    if (!match) throw unauthenticated('missing bearer token');
    const given = createHash('sha256').update(match[1]!).digest();
    if (!timingSafeEqual(given, expected)) throw unauthenticated('invalid admin token');
  });
  // The raw-body parser defers a JSON syntax error so that it is reported after authentication.
  app.addHook('preValidation', async (request) => {
    if (request.bodyParseError) throw invalid('body: is not valid JSON');
  });
}

export const adminAuthPlugin = appliesToRegisteringScope('admin-auth', adminAuth);
