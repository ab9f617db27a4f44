import { createBullBoard } from '@bull-board/api';
import { BullMQAdapter } from '@bull-board/api/bullMQAdapter';
import { FastifyAdapter } from '@bull-board/fastify';
import type { FastifyInstance } from 'fastify';
import type { UiContext } from './context.js';
import { UI_PREFIX } from './layout.js';
import { isAdmin } from './sessions.js';

export const QUEUE_BOARD_PATH = `${UI_PREFIX}/queues`;
export const QUEUE_BOARD_ADMIN_PATH = `${UI_PREFIX}/queues-admin`;

/**
 * The BullMQ dashboard (bull-board), behind the UI's login. bull-board's
 * read-only mode is a setting of each queue adapter, not of a request, so
 * there are two boards on the same queues: `/ui/queues`, read-only, for every
 * session, and `/ui/queues-admin`, with retry, clean, pause and the rest, for
 * sessions with the admin scope (the UI's guard refuses others, and the
 * board's own writes unless they come from a page of this origin).
 */
export async function registerQueueBoards(app: FastifyInstance, ctx: UiContext): Promise<void> {
  const queues = Object.values(ctx.deps.queues);
  for (const [path, readOnlyMode] of [
    [QUEUE_BOARD_PATH, true],
    [QUEUE_BOARD_ADMIN_PATH, false],
  ] as const) {
    const serverAdapter = new FastifyAdapter();
    serverAdapter.setBasePath(path);
    createBullBoard({
      queues: queues.map((q) => new BullMQAdapter(q, { readOnlyMode })),
      serverAdapter,
      options: {
        uiConfig: {
          boardTitle: readOnlyMode ? 'schedflow queues (read-only)' : 'schedflow queues',
          miscLinks: [{ text: 'Back to schedflow', url: `${UI_PREFIX}/jobs` }],
        },
      },
    });
    await app.register(async (board) => {
      if (!readOnlyMode) {
        board.addHook('onRequest', async (request, reply) => {
          const session = request.uiSession;
          if (!session || !isAdmin(session)) {
            return reply.code(403).type('text/plain').send('the queue dashboard with actions is for admins');
          }
        });
      }
      await board.register(serverAdapter.registerPlugin(), { prefix: path });
    });
  }
}
