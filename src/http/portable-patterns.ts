/**
 * The OpenAPI document's `pattern`s as any client generator can use them. The service checks its patterns as
 * ECMA-262 in Unicode mode (the `u` flag, ajv's default); client generators hand them to Python's `re`, Go's
 * `regexp`, Java's `Pattern`, PCRE or a JavaScript RegExp without the flag, which read some escapes otherwise or not
 * at all: `\p{…}` reads as letters outside Unicode mode (a generated client refused the default account label
 * `general`), look-arounds are unknown to Go, `\uXXXX` to PCRE and Go (and Perl reads `\u0000-\u001F` as a range
 * from `0`), and `\d`, `\s` take other digits and spaces in Python and Java (probes).
 *
 * So the document publishes each pattern in the subset they all read alike: `\d` as `0-9`, `\s` as the characters
 * JavaScript's `\s` stands for, `.` as what JavaScript's takes, `\uXXXX` as the character (`\xHH` below U+0100). One
 * that cannot be written so (Unicode properties, look-arounds, `\w`, `\b` and their kin, named groups, characters
 * beyond U+FFFF, a `.` or negated class that one such character could meet) is published as `x-svc-unicode-pattern`
 * instead, beside the schema's description of the rule in words. The service checks them all the same. Own code: no
 * library turns an ECMA-262 pattern into that common subset.
 */
export const UNICODE_PATTERN_KEY = 'x-svc-unicode-pattern';

/** JavaScript's `\s` (ECMA-262 WhiteSpace and LineTerminator), for a character class. */
const JS_SPACE = '\\t\\n\\x0B\\f\\r \\xA0\u1680\u2000-\u200A\u2028\u2029\u202F\u205F\u3000\uFEFF';

/**
 * What only JavaScript reads so: Unicode properties, `\u{…}`, look-arounds, named groups and their references, `\c`
 * controls, the empty classes `[]` and `[^]`.
 */
const JAVASCRIPT_ONLY = /\\[pPk]|\\u\{|\\c|\(\?<|\(\?[=!]|\[\^?\]/;
/** A character beyond U+FFFF: JavaScript without the `u` flag reads it as two. */
const ASTRAL = /[\uD800-\uDFFF]/;

/**
 * `pattern` in the subset every engine reads alike, or undefined when it cannot be written so. Conservative: what
 * matches one character in Unicode mode and may meet one beyond U+FFFF (`.`, a negated class) is kept only when
 * repeated without bound (`*`, `+`, `{n,}`), where reading such a character as two changes nothing.
 */
export function portablePattern(pattern: string): string | undefined {
  if (JAVASCRIPT_ONLY.test(pattern) || ASTRAL.test(pattern)) return undefined;
  /** After a `.` or a negated class at `end`: whether a repetition without bound follows. */
  const unbounded = (end: number) => /^(?:[*+]|\{\d+,\})/.test(pattern.slice(end));
  let out = '';
  let classStart = -1;
  for (let i = 0; i < pattern.length; i += 1) {
    const c = pattern[i]!;
    const inClass = classStart >= 0;
    if (c !== '\\') {
      if (c === '[' && !inClass) classStart = i;
      else if (c === ']' && inClass) {
        if (pattern[classStart + 1] === '^' && !unbounded(i + 1)) return undefined;
        classStart = -1;
      } else if (c === '.' && !inClass) {
        if (!unbounded(i + 1)) return undefined;
        // Python's `.` takes a carriage return and the line and paragraph separators; JavaScript's does not.
        out += '[^\\n\\r\u2028\u2029]';
        continue;
      }
      out += c;
      continue;
    }
    const next = pattern[i + 1] ?? '';
    i += 1;
    if (next === 'd') out += inClass ? '0-9' : '[0-9]';
    else if (next === 's') out += inClass ? JS_SPACE : `[${JS_SPACE}]`;
    else if (/[DSwWbB]/.test(next)) return undefined;
    else if (next === 'u' && /^[0-9A-Fa-f]{4}$/.test(pattern.slice(i + 1, i + 5))) {
      const unit = parseInt(pattern.slice(i + 1, i + 5), 16);
      // Half of a character beyond U+FFFF: no engine but JavaScript's reads it so.
      if (unit >= 0xd800 && unit <= 0xdfff) return undefined;
      i += 4;
      const char = String.fromCharCode(unit); // none of the pattern syntax, which is all below U+0080
      // Below U+0100 as `\xHH`, which every engine reads: a NUL in a pattern PHP refused, and a digit written as
      // itself joins an escape before it (`\1\u0030` would be `\10`).
      out += unit < 0x100 ? `\\x${unit.toString(16).toUpperCase().padStart(2, '0')}` : char;
    } else out += `\\${next}`;
  }
  return out;
}

/**
 * A copy of `document` with every pattern in it portable (portablePattern), or under UNICODE_PATTERN_KEY. A copy, so
 * that no schema object a route validates with (module constants such as AccountLabel, shared by every app made in
 * the process) is changed, whatever @fastify/swagger passes through by reference.
 */
export function withPortablePatterns<T>(original: T): T {
  const document = structuredClone(original);
  const visit = (node: unknown): void => {
    if (Array.isArray(node)) return node.forEach(visit);
    if (!node || typeof node !== 'object') return;
    const schema = node as Record<string, unknown>;
    if (typeof schema.pattern === 'string') {
      const portable = portablePattern(schema.pattern);
      if (portable === undefined) {
        schema[UNICODE_PATTERN_KEY] = schema.pattern;
        delete schema.pattern;
      } else schema.pattern = portable;
    }
    Object.values(schema).forEach(visit);
  };
  visit(document);
  return document;
}
