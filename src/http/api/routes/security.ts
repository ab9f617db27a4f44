/** OpenAPI security requirement of routes that need a token (the scope is named in each description). */
export const bearer = [{ bearer: [] as string[] }];
/**
 * OpenAPI security requirement of routes that need no token (probes, metrics): said as an empty
 * list rather than left out, so that tools and readers know the route is public and not undocumented.
 */
export const noToken: Record<string, string[]>[] = [];
