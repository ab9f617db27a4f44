// madge ships no types: the part of its API test/unit/import-graph.test.ts uses.
declare module 'madge' {
  interface MadgeConfig {
    baseDir?: string;
    fileExtensions?: string[];
    tsConfig?: string;
    excludeRegExp?: RegExp[];
    detectiveOptions?: Record<string, unknown>;
  }
  interface MadgeInstance {
    /** File → the files it imports, relative to the base directory. */
    obj(): Record<string, string[]>;
    /** Each cycle as the files on it. */
    circular(): string[][];
    /** Files madge could not resolve. */
    skipped: string[];
  }
  export default function madge(path: string | string[], config?: MadgeConfig): Promise<MadgeInstance>;
}
