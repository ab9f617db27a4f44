import type { TestProject } from 'vitest/node';
import { startTestPostgres } from './postgres.js';

/**
 * A vitest globalSetup: one PostgreSQL server for the run's files (initdb and a start cost a
 * second or two of CPU each; a server per file added up). Each file makes databases of its
 * own on it (test/helpers/postgres.ts, `testPostgres`).
 */

declare module 'vitest' {
  export interface ProvidedContext {
    /** postgres://… of the run's server, as its superuser, to its own database. */
    postgresUrl: string;
  }
}

export default async function setup(project: TestProject): Promise<() => Promise<void>> {
  const server = await startTestPostgres();
  project.provide('postgresUrl', server.url);
  return () => server.stop();
}
