import type { FastifyRequest } from 'fastify';
import { invalid } from '../domain/errors.ts';
import { hasLoneSurrogate } from '../lib/unicode.ts';
import { METHODS_WITH_BODY } from './raw-body.ts';
import './request-context.ts';

/*
 * The checks of a request's input that no route schema expresses, run after authentication (assertParsableInput):
 * the raw body (raw-body.ts) read as JSON, the query string's encoding, and text that could not be stored as sent.
 */

/** The raw body read as JSON: its value, or why it cannot be (a 400). No body is no value. */
function jsonBody(request: FastifyRequest): { value?: unknown; problem?: string } {
  const raw = request.rawBody;
  if (raw === undefined || raw.length === 0) return {};
  const encoding = request.headers['content-encoding'];
  if (encoding !== undefined && !isIdentityCoding(encoding)) {
    // Read as it came, a compressed body was refused as "not valid UTF-8 text", which named the wrong problem.
    return {
      problem: `content-encoding: ${JSON.stringify(encoding.slice(0, 40))} is not supported; send the body uncompressed`,
    };
  }
  // Node's parser takes the chunked coding off and reads whatever comes before it as nothing: "gzip, chunked" was
  // read as plain (probe). Only chunked is a transfer coding a request here may use.
  const transfer = request.headers['transfer-encoding'];
  if (transfer !== undefined && !CHUNKED.test(transfer)) {
    return {
      problem: `transfer-encoding: ${JSON.stringify(transfer.slice(0, 40))} is not supported; send the body with chunked alone, or with a content-length`,
    };
  }
  let text: string;
  try {
    text = UTF8.decode(raw);
  } catch {
    return { problem: 'body: is not valid UTF-8 text' };
  }
  // A byte order mark before the JSON (RFC 8259 §8.1 lets a parser ignore it; Fastify's own parser
  // does) is not part of the value. The signature still covers the bytes as sent.
  if (text.charCodeAt(0) === BYTE_ORDER_MARK) text = text.slice(1);
  const { tooDeep, duplicateKey } = scanStructure(text, MAX_BODY_DEPTH);
  if (tooDeep) return { problem: `body: is nested more than ${MAX_BODY_DEPTH} levels deep` };
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    return { problem: 'body: is not valid JSON' };
  }
  if (duplicateKey !== null)
    return { problem: `body: has the key ${JSON.stringify(duplicateKey).slice(0, 80)} twice in one object` };
  return { value };
}

const BYTE_ORDER_MARK = 0xfeff;

/**
 * The one content coding a body may have (RFC 9110 §8.4.1: "identity", or none). Bodies are not decompressed: they
 * are a few hundred bytes, and the request signature covers the bytes as sent. In linear time: written
 * `^\s*(identity)?\s*$`, the two runs of white space could split a long one every way, and 16 KB of tabs and an
 * `x` took 0.6 s of the event loop (probe).
 */
const IDENTITY = /^\s*(?:identity\s*)?$/i;

/** Whether a Content-Encoding value names no coding but identity (exported for its test). */
export const isIdentityCoding = (value: string): boolean => IDENTITY.test(value);
const CHUNKED = /^\s*chunked\s*$/i;

/**
 * JSON is UTF-8 (RFC 8259 §8.1). Decoded leniently, a byte sequence that is not (a Latin-1 "é") became U+FFFD and the
 * request went on with text other than what was sent and signed (review: an account label stored as "caf\uFFFD").
 * The byte order mark is kept, for the check above.
 */
const UTF8 = new TextDecoder('utf-8', { fatal: true, ignoreBOM: true });

/**
 * Deepest nesting of objects and arrays a body may have. The vendor's bodies go three levels deep; the
 * checks that walk a body (NUL characters here, canonical JSON and Unicode checks in onboarding) recurse,
 * and a body nested thousands of levels deep overflowed their stack (a 500).
 */
export const MAX_BODY_DEPTH = 32;

const QUOTE = 0x22;
const BACKSLASH = 0x5c;
const OPEN_BRACKET = 0x5b;
const CLOSE_BRACKET = 0x5d;
const OPEN_BRACE = 0x7b;
const CLOSE_BRACE = 0x7d;
const COMMA = 0x2c;

/**
 * One pass over a body's JSON text, before it is parsed (so on any text): whether objects and arrays nest more than
 * `maxDepth` deep (the checks that walk a body recurse, and a body nested thousands of levels deep overflowed their
 * stack: a 500), and the first key that appears twice in one object. JSON.parse keeps the last of such keys
 * silently, while another parser of the same signed bytes may keep the first (review: `{"side":"buy","side":"sell"}`
 * made a sell quote), so a body that says two things is refused. Ours, not a library's: JSON.parse has no hook for
 * either, and Fastify's secure-json-parse guards only the prototype keys. Brackets inside strings do not count; a key
 * with escapes is compared decoded.
 */
function scanStructure(text: string, maxDepth: number): { tooDeep: boolean; duplicateKey: string | null } {
  /** Per open object, its keys so far; null for an array. */
  const open: Array<Set<string> | null> = [];
  let expectKey = false;
  let duplicateKey: string | null = null;
  for (let i = 0; i < text.length; i++) {
    const char = text.charCodeAt(i);
    if (char === OPEN_BRACE || char === OPEN_BRACKET) {
      if (open.length >= maxDepth) return { tooDeep: true, duplicateKey };
      open.push(char === OPEN_BRACE ? new Set() : null);
      expectKey = char === OPEN_BRACE;
    } else if (char === CLOSE_BRACE || char === CLOSE_BRACKET) {
      open.pop();
    } else if (char === COMMA) {
      expectKey = open.at(-1) != null;
    } else if (char === QUOTE) {
      const start = i;
      let escaped = false;
      for (i++; i < text.length && text.charCodeAt(i) !== QUOTE; i++) {
        if (text.charCodeAt(i) === BACKSLASH) {
          escaped = true;
          i++;
        }
      }
      const keys = open.at(-1);
      if (expectKey && keys && duplicateKey === null) {
        const key = escaped ? decodedString(text.slice(start, i + 1)) : text.slice(start + 1, i);
        if (keys.has(key)) duplicateKey = key;
        keys.add(key);
      }
      expectKey = false;
    }
  }
  return { tooDeep: false, duplicateKey };
}

/** A JSON string literal's value; the literal itself where it is malformed (the parse then refuses the body). */
function decodedString(literal: string): string {
  try {
    return JSON.parse(literal) as string;
  } catch {
    return literal;
  }
}

const NUL = '\u0000';

type TextProblem = 'nul' | 'surrogate';

/**
 * Why a string cannot be stored as sent, or null: PostgreSQL refuses NUL in `text` (a 500 in the database
 * instead of a 400 naming the field), and a lone UTF-16 surrogate (JSON's `"\ud800"`) has no UTF-8 form, so
 * it would be stored as U+FFFD: a reference echoed as sent would then not match what was recorded.
 */
function textProblem(text: string): TextProblem | null {
  if (text.includes(NUL)) return 'nul';
  if (hasLoneSurrogate(text)) return 'surrogate';
  return null;
}

const VALUE_PROBLEMS: Record<TextProblem, string> = {
  nul: 'must not contain the NUL character (\\u0000)',
  surrogate: 'must be well-formed Unicode text',
};
/** A key that cannot be stored is named by where it is, not by itself. */
const KEY_PROBLEMS: Record<TextProblem, string> = {
  nul: 'has a key with the NUL character (\\u0000)',
  surrogate: 'has a key that is not well-formed Unicode text',
};

/** The first place in a JSON value where a string (key or value) cannot be stored, as "<path>: <problem>". */
function unstorableText(value: unknown, path: string, part: string): string | null {
  if (typeof value === 'string') {
    const problem = textProblem(value);
    return problem && `${path || part}: ${VALUE_PROBLEMS[problem]}`;
  }
  if (Array.isArray(value)) {
    for (let i = 0; i < value.length; i++) {
      const found = unstorableText(value[i], `${path}[${i}]`, part);
      if (found !== null) return found;
    }
    return null;
  }
  if (value !== null && typeof value === 'object') {
    for (const [key, inner] of Object.entries(value)) {
      const keyProblem = textProblem(key);
      if (keyProblem) return `${path || part}: ${KEY_PROBLEMS[keyProblem]}`;
      const found = unstorableText(inner, path ? `${path}.${key}` : key, part);
      if (found !== null) return found;
    }
  }
  return null;
}

/** decodeURIComponent of a query string's part (`+` is a space there), or null where it is not valid. */
function decodedQueryPart(text: string): string | null {
  try {
    return decodeURIComponent(text.replaceAll('+', ' '));
  } catch {
    return null;
  }
}

/**
 * The first query parameter whose name or value is not valid percent-encoded UTF-8 (`%ZZ`, a lone `%`, `%FF`), as
 * "<name>: <problem>". The query parser Fastify uses keeps such a part as it was sent, so `account_label=%ZZ` was
 * taken for the label "%ZZ" (review: a quote was stored with it) where a malformed path is a 400.
 */
function malformedQueryPart(url: string): string | null {
  const start = url.indexOf('?');
  if (start === -1 || url.indexOf('%', start) === -1) return null;
  for (const pair of url.slice(start + 1).split('&')) {
    if (!pair.includes('%')) continue;
    const eq = pair.indexOf('=');
    const name = decodedQueryPart(eq === -1 ? pair : pair.slice(0, eq));
    if (name === null) return 'query: has a parameter name that is not valid percent-encoded UTF-8';
    if (eq === -1 || decodedQueryPart(pair.slice(eq + 1)) !== null) continue;
    // Named as sent, unless the name itself is unfit to echo (the NUL and surrogate checks below find it too).
    return name.length <= 64 && textProblem(name) === null
      ? `${name}: is not valid percent-encoded UTF-8`
      : "query: a parameter's value is not valid percent-encoded UTF-8";
  }
  return null;
}

/**
 * Input checks that no route schema expresses, run after authentication (wire-contract §9): the body is
 * JSON (and not nested absurdly deep), read here into `request.body` for the route's schema, the query string is
 * well-formed percent-encoded UTF-8, and every text (a value or a key, in the path, the query or the body) can be
 * stored as sent: no NUL, no lone surrogate (see textProblem).
 */
export function assertParsableInput(request: FastifyRequest): void {
  // A fragment is not part of a request target (RFC 9112 §3.2): the router read it as query parameters, and the 400
  // named a parameter nobody sent ("x: is not allowed" for "/accounts#x", probe). Most likely a value's '#' unencoded.
  if (request.url.includes('#'))
    throw invalid(
      "request: the target has a '#' (a fragment is not sent in HTTP); encode a '#' in a value as %23",
    );
  // A GET's body is signed, not read (readUnreadBody).
  const body = METHODS_WITH_BODY.has(request.method) ? jsonBody(request) : {};
  if (body.problem !== undefined) throw invalid(body.problem);
  request.body = body.value;
  const query = malformedQueryPart(request.url);
  if (query !== null) throw invalid(query);
  for (const [part, value] of [
    ['params', request.params],
    ['query', request.query],
    ['body', request.body],
  ] as const) {
    const problem = unstorableText(value, '', part);
    if (problem !== null) throw invalid(problem);
  }
}
