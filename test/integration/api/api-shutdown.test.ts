import { connect } from 'node:net';
import { describe, expect, it } from 'vitest';
import { daemonTestEnv } from '../../helpers/daemon.js';

const env = daemonTestEnv();

/**
 * A shutdown waits for requests under way, but not for ever: a client that stops sending in the
 * middle of a request (a body that never ends, a stalled proxy) must not hold the local API's
 * shutdown step to its limit, which Ctrl-C would then show as a skipped step (chaos sigint-group).
 */
describe('stopping the local API', () => {
  it('cuts a request whose body never ends after a short grace, and every step still runs', async () => {
    const sim = await env.sim();
    const td = await env.daemon(sim.url);
    const { hostname: host, port } = new URL(td.daemon.apiUrl as string);
    const socket = connect(Number(port), host);
    await new Promise<void>((resolve) => socket.once('connect', () => resolve()));
    socket.write(
      `POST /api/v1/jobs HTTP/1.1\r\nHost: ${host}\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{"spec":`,
    );
    const closed = new Promise<number>((resolve) => socket.once('close', () => resolve(Date.now())));
    socket.on('error', () => undefined);
    // Read whatever comes, so the end of the connection is seen.
    socket.resume();
    // The request is under way once its headers are read.
    await new Promise((r) => setTimeout(r, 200));
    const started = Date.now();
    await td.stop();
    // The API is the second step to stop: the connection is cut after its 1 s grace, well before
    // the step's 5 s limit (a whole shutdown, every step, can take longer on a loaded machine).
    expect((await closed) - started).toBeLessThan(4000);
  }, 20_000);
});
