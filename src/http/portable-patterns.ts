/**
 * The OpenAPI document's `pattern`s as any client generator can use them. A few of the service's patterns are
 * ECMA-262 in Unicode mode (the `u` flag, ajv's default): Unicode properties (`\p{Default_Ignorable_Code_Point}`,
 * invisible characters) and look-arounds (no space at either end). Outside Unicode mode `\p{…}` reads as letters, and
 * Python's `re`, Go's `regexp` and Java's `Pattern` take them otherwise or not at all: a client generated from the
 * document refused the default account label `general` before sending it, or failed to load the document (probe).
 * Those are published as `x-svc-unicode-pattern` instead (the schema's description says the rule in words); the
 * service checks them all the same.
 */
const UNICODE_MODE_ONLY = /\\[pP]\{|\\u\{|\(\?<?[=!]/;
export const UNICODE_PATTERN_KEY = 'x-svc-unicode-pattern';

/**
 * A copy of `document` with the patterns only Unicode mode reads, anywhere in it, under UNICODE_PATTERN_KEY. A copy,
 * so that no schema object a route validates with (module constants such as AccountLabel, shared by every app made in
 * the process) is changed, whatever @fastify/swagger passes through by reference.
 */
export function withPortablePatterns<T>(original: T): T {
  const document = structuredClone(original);
  const visit = (node: unknown): void => {
    if (Array.isArray(node)) return node.forEach(visit);
    if (!node || typeof node !== 'object') return;
    const schema = node as Record<string, unknown>;
    if (typeof schema.pattern === 'string' && UNICODE_MODE_ONLY.test(schema.pattern)) {
      schema[UNICODE_PATTERN_KEY] = schema.pattern;
      delete schema.pattern;
    }
    Object.values(schema).forEach(visit);
  };
  visit(document);
  return document;
}
