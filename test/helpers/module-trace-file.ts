import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

/** For `node --import <MODULE_TRACE>` with MODULE_TRACE_FILE set: the process records every module it loads. */
export const MODULE_TRACE = pathToFileURL(path.join(import.meta.dirname, 'module-trace.mjs')).href;

/**
 * What a trace file (module-trace.mjs) says a process loaded: its own files, relative to `root`, in load order,
 * and the packages (node_modules) it loaded, sorted.
 */
export function modulesInTrace(traceFile: string, root: string): { files: string[]; packages: string[] } {
  const urls = [...new Set(readFileSync(traceFile, 'utf8').split('\n').filter(Boolean))];
  const files = urls
    .filter((url) => url.startsWith('file:') && !url.includes('/node_modules/'))
    .map((url) => path.relative(root, fileURLToPath(url)));
  const packages = [
    ...new Set(urls.flatMap((url) => /\/node_modules\/((?:@[^/]+\/)?[^/]+)\//.exec(url)?.[1] ?? [])),
  ].sort();
  return { files, packages };
}
