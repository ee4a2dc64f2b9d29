// The loader hooks of module-trace.mjs.
import { appendFileSync } from 'node:fs';

export async function resolve(specifier, context, nextResolve) {
  const resolved = await nextResolve(specifier, context);
  appendFileSync(process.env.MODULE_TRACE_FILE, `${resolved.url}\n`);
  return resolved;
}
