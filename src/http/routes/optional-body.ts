import type { FastifyDynamicSwaggerOptions } from '@fastify/swagger';
import type { FastifyRequest, FastifySchema } from 'fastify';

/**
 * preValidation of an action whose body is optional (every field of it is, or it has none): a bare request, as
 * curl sends it (the CLI sends `{}`), or a JSON `null`, is validated as `{}`, so that the schema still refuses
 * fields it does not know, and a bare request is not refused as "body: must be object".
 */
export async function bareBodyAsEmpty(request: FastifyRequest): Promise<void> {
  request.body ??= {};
}

/** The mark a route whose body may be left out carries into the OpenAPI document (see `optionalBodiesDocumented`). */
const OPTIONAL_BODY_MARK = 'x-svc-optional-body';

/**
 * For @fastify/swagger: the routes that take a bare request (`bareBodyAsEmpty`) say so in the OpenAPI document.
 * The library marks every body `required: true` (Fastify's own rule without such a hook), and a client generated
 * from the document was made to send a JSON body with a DELETE, which some clients and proxies drop (review).
 * `transform` marks the route's schema, `transformObject` turns the mark into `required: false`.
 */
export const optionalBodiesDocumented = {
  transform({ schema, url, route }) {
    const hooks = [route.preValidation].flat();
    if (!schema || !hooks.includes(bareBodyAsEmpty)) return { schema, url };
    return { schema: { ...schema, [OPTIONAL_BODY_MARK]: true } as FastifySchema, url };
  },
  transformObject(document) {
    const openapiObject = 'openapiObject' in document ? document.openapiObject : document.swaggerObject;
    const paths = (openapiObject as { paths?: Record<string, Record<string, Record<string, unknown>>> })
      .paths;
    for (const operations of Object.values(paths ?? {})) {
      for (const operation of Object.values(operations)) {
        if (!operation || typeof operation !== 'object' || !(OPTIONAL_BODY_MARK in operation)) continue;
        delete operation[OPTIONAL_BODY_MARK];
        const body = operation.requestBody as { required?: boolean } | undefined;
        if (body) body.required = false;
      }
    }
    return openapiObject;
  },
} satisfies Pick<FastifyDynamicSwaggerOptions, 'transform' | 'transformObject'>;
