import type { FastifyInstance, FastifyRequest } from 'fastify';
import { AUTH_HEADERS } from '../../contract/request-signature.ts';
import { forbidden, unauthenticated } from '../../domain/errors.ts';
import type { Authenticator, Caller } from '../../domain/platforms/authenticator.ts';
import type { NetworkRules } from '../../domain/platforms/network-rules.ts';
import '../request-context.ts';
import { repeatedHeader } from '../repeated-header.ts';
import { appliesToRegisteringScope } from './plugin-scope.ts';
import { assertParsableInput } from '../input-checks.ts';
import { readUnreadBody } from '../raw-body.ts';

function header(value: string | string[] | undefined): string | undefined {
  return Array.isArray(value) ? value[0] : value;
}

const AUTH_HEADER_NAMES = Object.values(AUTH_HEADERS);

export interface AuthenticationDeps {
  authenticator: Authenticator;
  networkRules: NetworkRules;
}

/**
 * Authentication (401), then the caller's platform allow-list (403): the request's caller. A body Fastify left unread
 * (a GET's, or any before routing) is read first, at most `bodyLimitBytes`: the signature covers it.
 */
export async function authenticatedCaller(
  deps: AuthenticationDeps,
  request: FastifyRequest,
  bodyLimitBytes: number,
): Promise<Caller> {
  await readUnreadBody(request, bodyLimitBytes);
  // Node joins a custom header's lines with ", ": refused as an unknown key, a bad timestamp or signature (probe).
  const repeated = repeatedHeader(request.raw.rawHeaders, AUTH_HEADER_NAMES);
  if (repeated)
    throw unauthenticated(`header ${repeated.toUpperCase()} is given more than once (send it once)`);
  const caller = await deps.authenticator.authenticate({
    apiKey: header(request.headers[AUTH_HEADERS.apiKey]),
    signature: header(request.headers[AUTH_HEADERS.signed]),
    timestamp: header(request.headers[AUTH_HEADERS.timestamp]),
    passphrase: header(request.headers[AUTH_HEADERS.passphrase]),
    method: request.method,
    route: request.raw.url ?? request.url,
    rawBody: request.rawBody,
  });
  if (!(await deps.networkRules.platformAllows(caller.platformCode, request.ip))) {
    throw forbidden(`IP address ${request.ip} is not on the allow-list of platform ${caller.platformCode}`);
  }
  return caller;
}

/**
 * wire-contract §9 order, after the firewall and the rate limit: authentication (401) → platform
 * allow-list (403) → the body is JSON (400) → schema validation (400) → the route.
 */
async function authentication(app: FastifyInstance, options: AuthenticationDeps): Promise<void> {
  app.decorateRequest('caller', null);
  app.addHook('preValidation', async (request) => {
    request.caller = await authenticatedCaller(options, request, request.routeOptions.bodyLimit);
    assertParsableInput(request);
  });
}

export const authenticationPlugin = appliesToRegisteringScope('authentication', authentication);
