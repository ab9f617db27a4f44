import type { FastifyInstance } from 'fastify';
import { takeTurn } from '../../lib/turns.js';
import { API_PREFIX } from '../../views/views.js';

/**
 * The API's reads take turns (src/lib/turns.ts): each runs (its query, its view, its
 * serialisation) in a turn of the event loop of its own, in the order they came, beside the
 * daemon's other slices of work. A page of jobs costs a few milliseconds;
 * 32 clients asking at once had every one run back to back in one turn, and `/healthz`, the
 * workers' answers from Redis and the scheduler waited behind all of them (163 ms and more,
 * issue 14). Between two reads the loop now takes in what else is ready.
 *
 * Writes are left out: acceptances of one turn share a commit (src/requests/accept.ts), which
 * taking turns would undo.
 */
export function registerReadTurns(app: FastifyInstance): void {
  app.addHook('preHandler', (request, _reply, done) => {
    if (request.method !== 'GET' || !request.routeOptions.config.scope || !request.url.startsWith(API_PREFIX)) {
      done();
      return;
    }
    takeTurn(done);
  });
}
