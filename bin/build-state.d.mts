// Types of build-state.mjs (plain JavaScript: it runs before anything could compile TypeScript), for the TypeScript
// that imports it (the benches).
export declare const BUILD_INFO: string;
export declare function sourceDigest(root: string): string;
export declare function currentBuild(root: string): string | null;
