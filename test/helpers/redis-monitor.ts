import { connect } from 'node:net';

/**
 * Redis MONITOR over a plain socket, for tests that count what Redis runs.
 *
 * Not ioredis' `monitor()`: it sets its "monitoring" state a microtask after MONITOR's `+OK`, so monitor
 * lines that arrive in the same read as the `+OK` (any other client busy at that moment) are taken as
 * replies to no command. Its promise then rejects and its connection stays open for good; in CI that
 * failed a test and then kept the test file from ever exiting. Here the `+OK` and the lines after it are
 * read in order from one stream, so there is no such window.
 */
export interface RedisMonitor {
  close(): void;
}

/** Starts MONITOR at `redisUrl`; resolves once Redis has confirmed it, then calls `onCommand` per command run. */
export function startRedisMonitor(
  redisUrl: string,
  onCommand: (args: string[]) => void,
): Promise<RedisMonitor> {
  const url = new URL(redisUrl);
  const socket = connect(Number(url.port || 6379), url.hostname);
  socket.setEncoding('utf8');
  const password = decodeURIComponent(url.password);
  const user = decodeURIComponent(url.username);
  const commands = [...(password ? [user ? ['AUTH', user, password] : ['AUTH', password]] : []), ['MONITOR']];
  socket.write(commands.map(encodeCommand).join(''));
  let pendingOks = commands.length;
  let buffered = '';
  return new Promise<RedisMonitor>((resolve, reject) => {
    socket.once('error', reject);
    socket.on('data', (chunk: string) => {
      buffered += chunk;
      let end: number;
      while ((end = buffered.indexOf('\r\n')) >= 0) {
        const line = buffered.slice(0, end);
        buffered = buffered.slice(end + 2);
        if (pendingOks > 0) {
          if (line !== '+OK') {
            socket.destroy();
            reject(new Error(`Redis refused MONITOR: ${line}`));
            return;
          }
          if (--pendingOks === 0) {
            socket.removeListener('error', reject);
            socket.on('error', () => {}); // a monitor closed under way is of no interest to the test
            resolve({ close: () => socket.destroy() });
          }
          continue;
        }
        // +1700000000.123456 [0 127.0.0.1:5555] "evalsha" "abc" "0" …
        if (line.startsWith('+')) onCommand(parseArgs(line));
      }
    });
  });
}

function encodeCommand(args: string[]): string {
  return `*${args.length}\r\n${args.map((a) => `$${Buffer.byteLength(a)}\r\n${a}\r\n`).join('')}`;
}

/** The quoted arguments of one monitor line, with Redis's escapes (\" \\ \n \r \t \xHH) undone. */
function parseArgs(line: string): string[] {
  const args: string[] = [];
  for (const match of line.matchAll(/"((?:[^"\\]|\\.)*)"/g)) {
    args.push(
      match[1]!.replace(/\\(x[0-9a-fA-F]{2}|.)/g, (_, escape: string) => {
        if (escape.startsWith('x') && escape.length === 3)
          return String.fromCharCode(parseInt(escape.slice(1), 16));
        return (
          ({ n: '\n', r: '\r', t: '\t', a: '\x07', b: '\b' } as Record<string, string>)[escape] ?? escape
        );
      }),
    );
  }
  return args;
}
