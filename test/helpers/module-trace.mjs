// `node --import tsx --import ./test/helpers/module-trace.mjs …` with MODULE_TRACE_FILE set: appends the URL
// of every module the process resolves to that file, one a line (test/unit/light-imports.test.ts). Plain
// JavaScript: the hooks run on node's loader thread, before anything could compile TypeScript for them.
import { register } from 'node:module';

register('./module-trace-hooks.mjs', import.meta.url);
