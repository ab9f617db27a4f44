import { randomUUID } from 'node:crypto';
import { type ServerResponse, STATUS_CODES } from 'node:http';
import type { Socket } from 'node:net';
import type { FastifyBaseLogger } from 'fastify';

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

function answerOf(nodeCode: string | undefined): { status: number; code: string; message: string } {
  switch (nodeCode) {
    case 'HPE_HEADER_OVERFLOW':
      return {
        status: 431,
        code: 'SCHEDFLOW_ERR_HEADERS_TOO_LARGE',
        message: 'the request line and headers are larger than 16 KiB',
      };
    case 'ERR_HTTP_REQUEST_TIMEOUT':
      return { status: 408, code: 'SCHEDFLOW_ERR_REQUEST_TIMEOUT', message: 'the request did not arrive in time' };
    default:
      return {
        status: 400,
        code: 'SCHEDFLOW_ERR_MALFORMED_REQUEST',
        message: `the request is not valid HTTP/1.1${nodeCode ? ` (${nodeCode})` : ''}`,
      };
  }
}
