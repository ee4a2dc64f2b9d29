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
 * instead, beside the schema's description of the rule in words. The service checks them all the same. One
 * difference stays, as no end anchor reads alike in all: Python's and PCRE's `$` also matches before a final line
 * feed, Java's before any final line terminator. Own code: no library turns an ECMA-262 pattern into that common subset.
 */
export const UNICODE_PATTERN_KEY = 'x-svc-unicode-pattern';

/** JavaScript's `\s` (ECMA-262 WhiteSpace and LineTerminator), for a character class. */
const JS_SPACE = '\\t\\n\\x0B\\f\\r \\xA0\u1680\u2000-\u200A\u2028\u2029\u202F\u205F\u3000\uFEFF';

/** Escapes whose character is the one escaped, in every engine. */
const ESCAPED_SYNTAX = '\\^$.|?*+()[]{}-/';
const CONTROL_ESCAPES: Record<string, number> = { t: 0x09, n: 0x0a, v: 0x0b, f: 0x0c, r: 0x0d };
/** JavaScript's `.`: anything but a line terminator. */
const JS_DOT = '[^\\n\\r\u2028\u2029]';

/** One character of a pattern (its code point, as published), or `\d` or `\s` (a set). */
type Unit = { cp: number; text: string } | { set: 'd' | 's' };

/** A code point as every engine reads it: `\xHH` below U+0100 (a NUL PHP refused, a digit joining an escape). */
function published(cp: number): string {
  return cp < 0x100 ? `\\x${cp.toString(16).toUpperCase().padStart(2, '0')}` : String.fromCharCode(cp);
}

/** The unit at `i` (a character or an escape) and where the next begins; undefined when it has no portable form. */
function unitAt(pattern: string, i: number): { unit: Unit; next: number } | undefined {
  const c = pattern[i]!;
  if (c !== '\\') {
    const cp = c.charCodeAt(0);
    // Half of a character beyond U+FFFF: JavaScript without the `u` flag reads the character as two.
    if (cp >= 0xd800 && cp <= 0xdfff) return undefined;
    return { unit: { cp, text: cp < 0x21 || (cp >= 0x7f && cp <= 0xa0) ? published(cp) : c }, next: i + 1 };
  }
  const e = pattern[i + 1] ?? '';
  if (e === 'd' || e === 's') return { unit: { set: e }, next: i + 2 };
  if (e in CONTROL_ESCAPES)
    return { unit: { cp: CONTROL_ESCAPES[e]!, text: published(CONTROL_ESCAPES[e]!) }, next: i + 2 };
  if (ESCAPED_SYNTAX.includes(e)) return { unit: { cp: e.charCodeAt(0), text: `\\${e}` }, next: i + 2 };
  const hex = e === 'x' ? 2 : e === 'u' ? 4 : 0;
  const digits = pattern.slice(i + 2, i + 2 + hex);
  if (hex === 0 || !new RegExp(`^[0-9A-Fa-f]{${hex}}$`).test(digits)) return undefined; // \w, \b, \p, \1, \c…
  const cp = parseInt(digits, 16);
  if (cp >= 0xd800 && cp <= 0xdfff) return undefined;
  return { unit: { cp, text: published(cp) }, next: i + 2 + hex };
}

/**
 * A character as written in a class: punctuation that means something in a class somewhere escaped (`-`, `[`, which
 * opens a nested class in Java, range end or not: review; Java's `&&`, Python's set operations).
 */
function inClass(text: string): string {
  // `\&` and `\~` are no escapes in Unicode mode (review: ajv's default refused `^[!-\~]+$`): as `\xHH`.
  if (text === '&' || text === '~') return published(text.charCodeAt(0));
  return /^[-[\]\\^|]$/.test(text) ? `\\${text}` : text;
}

/** A character class at `i` (its `[`) as published and where the pattern goes on; undefined when not portable. */
function classAt(pattern: string, i: number): { text: string; negated: boolean; next: number } | undefined {
  const negated = pattern[i + 1] === '^';
  let at = i + (negated ? 2 : 1);
  let text = '';
  let items = 0;
  while (at < pattern.length && pattern[at] !== ']') {
    const first = unitAt(pattern, at);
    if (!first) return undefined;
    at = first.next;
    items += 1;
    if ('set' in first.unit) {
      text += first.unit.set === 'd' ? '0-9' : JS_SPACE;
      continue;
    }
    if (pattern[at] === '-' && pattern[at + 1] !== ']' && at + 1 < pattern.length) {
      const last = unitAt(pattern, at + 1);
      if (!last || 'set' in last.unit) return undefined;
      // A range across U+D800-U+DFFF takes the halves of a character beyond U+FFFF without the `u` flag.
      if (first.unit.cp <= 0xdfff && last.unit.cp >= 0xd800) return undefined;
      text += `${inClass(first.unit.text)}-${inClass(last.unit.text)}`;
      at = last.next;
    } else text += inClass(first.unit.text);
  }
  // An empty class (`[]`, `[^]`) Python refuses; an unclosed one is no pattern.
  if (pattern[at] !== ']' || items === 0) return undefined;
  return { text: `[${negated ? '^' : ''}${text}]`, negated, next: at + 1 };
}

/** The largest count Go's regexp takes in `{n,m}` (PCRE's is 65,535, Python's and Java's larger). */
const MAX_COUNT = 1_000;

/**
 * The quantifier at `i` (none: ''), its counts written as plain numbers (Go reads `{02}` as text: review), and where
 * the pattern goes on; undefined for a count past MAX_COUNT.
 */
function quantifierAt(pattern: string, i: number): { text: string; next: number } | undefined {
  const found = /^(?:([*+?])|\{(\d+)(?:(,)(\d*))?\})(\??)/.exec(pattern.slice(i));
  if (!found) return { text: '', next: i };
  const [whole, simple, min, comma, max, lazy] = found;
  if (simple) return { text: whole, next: i + whole.length };
  const counts = [min, max].filter((n) => n !== undefined && n !== '').map(Number);
  if (counts.some((n) => n > MAX_COUNT)) return undefined;
  const text = `{${Number(min)}${comma ?? ''}${max ? Number(max) : ''}}${lazy}`;
  return { text, next: i + whole.length };
}

/**
 * `pattern` in the subset every engine reads alike, or undefined when it cannot be written so. What it takes:
 * characters of the Basic Multilingual Plane, escapes of characters, `\d`, `\s`, classes, `(…)` and `(?:…)`, `|`, the
 * anchors and the quantifiers. A `.` or a negated class (which may meet a character beyond U+FFFF, one character in
 * Unicode mode and two without it) is taken once in a pattern, outside any group, repeated by `*` or `+`: then it
 * takes such a character whole or not at all either way (review: `^.{2,}$`, `^[^,]+[^;]+$` took one emoji as two).
 */
export function portablePattern(pattern: string): string | undefined {
  let out = '';
  let wide = 0;
  /** Of each group open (innermost last), and of the group just closed: whether a `{n,m}` count is in it. */
  const counted: boolean[] = [];
  let closedCounted = false;
  for (let i = 0; i < pattern.length;) {
    const c = pattern[i]!;
    let atom: { text: string; wide: boolean; next: number } | undefined;
    if (c === '^' || c === '$' || c === '|') {
      // An anchor in a group, which a quantifier may repeat, Java reads otherwise (review: `(?:a|^){2}$`).
      if (c !== '|' && counted.length > 0) return undefined;
      out += c;
      i += 1;
      continue;
    }
    if (c === '(') {
      // Only plain and non-capturing groups: look-arounds and named groups are not read alike.
      const open = pattern.startsWith('(?:', i) ? '(?:' : pattern[i + 1] === '?' ? undefined : '(';
      if (!open) return undefined;
      out += open;
      counted.push(false);
      i += open.length;
      continue;
    }
    if (c === ')') {
      if (counted.length === 0) return undefined;
      closedCounted = counted.pop()!;
      atom = { text: ')', wide: false, next: i + 1 };
    } else if (c === '[') {
      const found = classAt(pattern, i);
      if (!found) return undefined;
      atom = { text: found.text, wide: found.negated, next: found.next };
    } else if (c === '.') {
      atom = { text: JS_DOT, wide: true, next: i + 1 };
    } else if ('*+?{}]'.includes(c)) {
      return undefined; // a quantifier with nothing to repeat, or a lone bracket: no pattern in Unicode mode
    } else {
      const found = unitAt(pattern, i);
      if (!found) return undefined;
      const unit = found.unit;
      atom = {
        text: 'set' in unit ? (unit.set === 'd' ? '[0-9]' : `[${JS_SPACE}]`) : unit.text,
        wide: false,
        next: found.next,
      };
    }
    out += atom.text;
    i = atom.next;
    const quantifier = quantifierAt(pattern, i);
    if (quantifier === undefined) return undefined;
    if (atom.wide) {
      wide += 1;
      if (wide > 1 || counted.length > 0 || !/^[*+]\??$/.test(quantifier.text)) return undefined;
    }
    const isCounted = quantifier.text.startsWith('{');
    const holdsCount = atom.text === ')' && closedCounted;
    // Go bounds the product of nested counts by 1,000 (review: `^(?:a{2}){501}$`): a count of a counted group, none.
    if (isCounted && holdsCount) return undefined;
    if ((isCounted || holdsCount) && counted.length > 0) counted[counted.length - 1] = true;
    out += quantifier.text;
    i = quantifier.next;
  }
  return counted.length === 0 ? out : undefined;
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
