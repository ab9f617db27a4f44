import type { FastifyReply } from 'fastify';

/**
 * The two ways to reach the scheduler. `proxy` is the site proxy (bearer tokens, scopes, account
 * binding, a GET cache, JSON errors of its own); `slurmrestd` is plain slurmrestd, which has none
 * of that: it authenticates before it routes, hands the token on to slurmctld and slurmdbd, and
 * answers what they say. Both serve the same Slurm bodies.
 */
export interface Flavor {
  kind: 'proxy' | 'slurmrestd';
  controller: string;
  accounting: string;
  /** Header names of the user-name/token pair. */
  userName: string;
  userToken: string;
}

export const PROXY: Flavor = {
  kind: 'proxy',
  controller: '/sched',
  accounting: '/scheddb',
  userName: 'x-sched-user-name',
  userToken: 'x-sched-user-token',
};

export const SLURMRESTD: Flavor = {
  kind: 'slurmrestd',
  controller: '/slurm',
  accounting: '/slurmdb',
  userName: 'x-slurm-user-name',
  userToken: 'x-slurm-user-token',
};

/**
 * slurmrestd's plain-text answers: slurm_strerror() of the error it fails with, as the whole body.
 */
export const SLURMRESTD_TEXT = {
  /** ESLURM_REST_AUTH_FAIL: 401 to any request without a credential, whatever the path. */
  unauthenticated: 'Authentication failure',
  /** ESLURM_REST_UNKNOWN_URL: 404 to a path (or data-parser version) it has no operation for. */
  notFound:
    "Unable to find requested URL endpoint. Please query the '/openapi/v3' endpoint or visit 'https://slurm.schedmd.com/rest_api.html' for the OpenAPI specification which includes a list of all possible slurmrestd endpoints.",
  /** SLURM_ERROR: 500 to a query its URL parser rejects, e.g. a literal comma (`job_id=1,2`). */
  unparsableQuery: 'Unspecified error',
  /** ESLURM_REST_FAIL_PARSING: 400 to a request body that is not JSON. */
  unparsableBody: 'Failure during parsing',
  /** ESLURM_DATA_UNKNOWN_MIME_TYPE: 415 to a body of a type no serializer plugin reads. */
  unknownMimeType: 'MIME type is unknown to any loaded plugins',
  /** SLURM_PROTOCOL_INSANE_MSG_LENGTH: 500 to a request line and headers over 80 KiB. */
  insaneLength: 'Insane message length',
} as const;

/**
 * How much request line and headers slurmrestd 25.11.7 reads (http_parser's 80 KiB): a URL of
 * 81,644 bytes is answered, one of 81,964 is `500 INTERNAL ERROR` with `Insane message length`
 * (about 5,100 repeated `job_id=` of 8 digits).
 */
export const SLURMRESTD_MAX_HEAD_BYTES = 80 * 1024;

/** A plain-text answer as slurmrestd sends it: exactly `text/plain`, no charset, connection closed. */
export function sendSlurmrestdText(reply: FastifyReply, status: number, text: string): FastifyReply {
  // Bytes, not a string: Fastify would add `; charset=utf-8` to the type of a string.
  return reply.code(status).header('content-type', 'text/plain').header('connection', 'close').send(Buffer.from(text));
}

/** Whether a request carries a credential slurmrestd would pass on (it checks none itself). */
export function hasSlurmrestdCredential(headers: Record<string, string | string[] | undefined>): boolean {
  return Boolean(headers[SLURMRESTD.userToken] || headers.authorization);
}

/**
 * slurmrestd's URL parser refuses a query with a literal comma in it (answering a bare 500),
 * although its own documents describe `job_id=1,2`; `%2C` gets past it to the operation.
 */
export function hasRawComma(url: string): boolean {
  const query = url.indexOf('?');
  return query >= 0 && url.slice(query).includes(',');
}
