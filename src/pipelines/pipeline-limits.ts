/**
 * The bounds on one pipeline file, in one place (the README lists them). A
 * file is loaded on the daemon's event loop, at start and on every change, so
 * a file far beyond what a person writes (one of 60,000 steps took six
 * minutes) would stall every run and request meanwhile; these keep one load
 * to milliseconds and say which limit a file broke.
 */

export { MAX_YAML_ALIASES } from '../lib/yaml-source.js';

/** Largest pipeline file read; checked before reading, so a huge file costs nothing. */
export const MAX_PIPELINE_FILE_BYTES = 1024 * 1024;

/** Most steps in one pipeline; a bigger workflow is several pipelines, or array jobs (`array:`). */
export const MAX_PIPELINE_STEPS = 1000;
