/**
 * `schedflow/client`: a typed client of schedflow's local HTTP API (docs/http-api.md#typescript-client).
 * It imports nothing of the daemon: only `fetch` and the types generated from the API's
 * OpenAPI document (docs/openapi.json → api-types.ts, `npm run client:types`).
 */
export type * from './api-shapes.js';
export type { components, paths } from './api-types.js';
export {
  type CallOptions,
  type JobFilters,
  type Made,
  type MakeOptions,
  type RunFilters,
  SchedflowClient,
  type SchedflowClientOptions,
} from './client.js';
export {
  SchedflowApiError,
  SchedflowClientError,
  SchedflowNetworkError,
  SchedflowTimeoutError,
  SchedflowUnexpectedAnswerError,
} from './client-errors.js';
export type { Page } from './paging.js';
export { DEFAULT_RETRY, parseRetryAfter, type RetryEvent, type RetryPolicy } from './retry.js';
export {
  isTerminalJobState,
  isTerminalRunState,
  TERMINAL_JOB_STATES,
  TERMINAL_RUN_STATES,
  type TerminalJobState,
  type TerminalRunState,
} from './states.js';
export type { WaitOptions } from './wait.js';
