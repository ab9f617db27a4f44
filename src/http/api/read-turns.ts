import type { FastifyInstance } from 'fastify';
import { API_PREFIX } from '../../views/views.js';

/**
 * The API's reads take turns: each runs (its query, its view, its serialisation) in a turn of
 * the event loop of its own, in the order they came. A page of jobs costs a few milliseconds;
 * 32 clients asking at once had every one run back to back in one turn, and `/healthz`, the
 * workers' answers from Redis and the scheduler waited behind all of them (163 ms and more,
 * issue 14). Between two reads the loop now takes in what else is ready.
 *
 * Writes are left out: acceptances of one turn share a commit (src/requests/accept.ts), which
 * taking turns would undo.
 */
export function registerReadTurns(app: FastifyInstance): void {
  const turns = new Turns();
  app.addHook('preHandler', (request, _reply, done) => {
    if (request.method !== 'GET' || !request.routeOptions.config.scope || !request.url.startsWith(API_PREFIX)) {
      done();
      return;
    }
    turns.take(done);
  });
}

/** Callbacks run one per turn of the event loop, first come first served. */
class Turns {
  #waiting: (() => void)[] = [];
  #next = 0;
  #scheduled = false;

  take(run: () => void): void {
    this.#waiting.push(run);
    if (!this.#scheduled) {
      this.#scheduled = true;
      setImmediate(this.#runOne);
    }
  }

  // An immediate set from inside an immediate runs at the next turn, after the loop's I/O.
  readonly #runOne = (): void => {
    const run = this.#waiting[this.#next];
    this.#waiting[this.#next++] = noop;
    if (this.#next === this.#waiting.length) {
      this.#waiting = [];
      this.#next = 0;
      this.#scheduled = false;
    } else {
      setImmediate(this.#runOne);
    }
    run?.();
  };
}

const noop = () => undefined;
