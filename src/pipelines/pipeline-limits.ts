/**
 * The bounds on one pipeline file, in one place (the README lists them). The
 * daemon loads files in a worker thread (pipeline-thread.ts), but a load
 * still holds up reloads and schedules, and `schedflow validate` runs on the
 * CLI's one thread: a file far beyond what a person writes (one of 60,000
 * steps took six minutes) is refused, saying which limit it broke.
 */

export { MAX_YAML_ALIASES } from '../lib/yaml-source.js';

/** Largest pipeline file read; checked before reading, so a huge file costs nothing. */
export const MAX_PIPELINE_FILE_BYTES = 1024 * 1024;

/** Most steps in one pipeline; a bigger workflow is several pipelines, or array jobs (`array:`). */
export const MAX_PIPELINE_STEPS = 1000;
