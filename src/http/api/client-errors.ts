import { randomUUID } from 'node:crypto';
import { type ServerResponse, STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyBaseLogger } from 'fastify';
import { type ErrorCode, errorSpec } from '../../errors.js';

/**
 * What Node's HTTP parser refuses before Fastify sees a request (Node's `clientError`):
 * headers over its limit (16 KiB), a request that is not HTTP, one too slow to arrive.
 * Each gets the API's error body, as a whole HTTP answer with `Connection: close`: the
 * parser has lost its place in the stream, so the connection cannot serve another request.
 */
export function clientErrorHandler(
  logger: FastifyBaseLogger,
): (error: Error & { code?: string }, socket: Socket) => void {
  return (error, socket) => {
    // A reset connection, or one already closed: there is no one to answer.
    if (error.code === 'ECONNRESET' || socket.destroyed) return;
    const answer = answerOf(error.code);
    // Like every answer, one id for it and its log line (there is no request to carry one).
    const reqId = randomUUID();
    // The message only, not the error: Node's parser errors carry `rawPacket`, the request's
    // own bytes, Authorization header included, which pino's err serializer would write out.
    logger.debug(
      { reqId, err: error.message, code: error.code, status: answer.status },
      'malformed HTTP request refused',
    );
    // Only when no answer is being written on the connection (Node's own check), or the bytes
    // would land in the middle of it; after an earlier request's whole answer is fine.
    const inFlight = (socket as Socket & { _httpMessage?: ServerResponse | null })._httpMessage;
    if (!socket.writable || inFlight?.headersSent) {
      socket.destroy();
      return;
    }
    const body = JSON.stringify({ error: { code: answer.code, message: answer.message } });
    socket.end(
      `HTTP/1.1 ${answer.status} ${STATUS_CODES[answer.status]}\r\n` +
        'Content-Type: application/json; charset=utf-8\r\n' +
        `Content-Length: ${Buffer.byteLength(body)}\r\n` +
        `X-Request-Id: ${reqId}\r\n` +
        'Connection: close\r\n\r\n' +
        body,
      () => socket.destroy(),
    );
  };
}

function answerOf(nodeCode: string | undefined): { status: number; code: ErrorCode; message: string } {
  switch (nodeCode) {
    case 'HPE_HEADER_OVERFLOW':
      return answer('SCHEDFLOW_ERR_HEADERS_TOO_LARGE', 'the request line and headers are larger than 16 KiB');
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return answer('SCHEDFLOW_ERR_REQUEST_TIMEOUT', 'the request did not arrive in time');
    default:
      return answer(
        'SCHEDFLOW_ERR_MALFORMED_REQUEST',
        `the request is not valid HTTP/1.1${nodeCode ? ` (${nodeCode})` : ''}`,
      );
  }
}

/** The registry's status for the code (each of these has one). */
function answer(code: ErrorCode, message: string): { status: number; code: ErrorCode; message: string } {
  return { status: errorSpec(code).status ?? 400, code, message };
}
