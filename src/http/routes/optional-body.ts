import type { FastifyRequest } from 'fastify';

/**
 * preValidation of an operator POST whose body is optional (every field of it is, or it has none): a bare POST, as
 * curl sends it (the CLI sends `{}`), or a JSON `null`, is validated as `{}`, so that the schema still refuses
 * fields it does not know, and a bare POST is not refused as "body: must be object".
 */
export async function bareBodyAsEmpty(request: FastifyRequest): Promise<void> {
  request.body ??= {};
}
