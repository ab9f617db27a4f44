/** OpenAPI security requirement of routes that need a token (the scope is named in each description). */
export const bearer = [{ bearer: [] as string[] }];
