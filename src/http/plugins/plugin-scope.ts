/**
 * Fastify encapsulates every registered plugin: hooks and decorators added inside a plain plugin cover only
 * the routes registered inside that plugin, so a firewall or authentication hook registered with
 * `scope.register(plugin)` would guard nothing. Marking the plugin skip-override (the two symbols that
 * fastify-plugin sets) lifts its hooks into the scope that registers it, and no further.
 * Two symbols do not justify a dependency; fastify documents them in docs/Reference/Plugins.md.
 */
export function appliesToRegisteringScope<T extends object>(name: string, plugin: T): T {
  return Object.assign(plugin, {
    [Symbol.for('skip-override')]: true,
    [Symbol.for('fastify.display-name')]: name,
  });
}
