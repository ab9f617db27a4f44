/**
 * Data-parser versions of the scheduler REST API that schedflow speaks.
 * The proxy contract (section 9) serves exactly these, with `latest` as an alias.
 */
export const SUPPORTED_VERSIONS = ['v0.0.42', 'v0.0.43', 'v0.0.44'] as const;

export type ApiVersion = (typeof SUPPORTED_VERSIONS)[number];

export const LATEST_VERSION: ApiVersion = 'v0.0.44';

export function isApiVersion(value: string): value is ApiVersion {
  return (SUPPORTED_VERSIONS as readonly string[]).includes(value);
}

/** Resolves a path segment (`v0.0.44` or `latest`) to a concrete version, or undefined. */
export function resolveVersion(segment: string): ApiVersion | undefined {
  if (segment === 'latest') return LATEST_VERSION;
  return isApiVersion(segment) ? segment : undefined;
}
