/** A page of a list: its items and the cursor of the next (null on the last). */
export interface Page<T> {
  items: T[];
  next: string | null;
}

/**
 * Every item of a list, page after page, following `next` as `cursor` until it is null. Pages are
 * read as the loop asks for items: a `break` reads no further page.
 */
export async function* everyItem<T>(readPage: (cursor: string | undefined) => Promise<Page<T>>): AsyncGenerator<T> {
  let cursor: string | undefined;
  do {
    const page = await readPage(cursor);
    yield* page.items;
    cursor = page.next ?? undefined;
  } while (cursor !== undefined);
}
