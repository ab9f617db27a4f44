import { readdirSync, readFileSync } from 'node:fs';
import { builtinModules } from 'node:module';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';

/**
 * What the code loads when it runs is in package.json's `dependencies`: an installed package
 * (`npm install -g schedflow-X.tgz`) has no devDependencies, and a module found only there
 * fails on a user's machine, not in the repository. Read with TypeScript's parser: `import
 * type` and `export type` are erased and need nothing at run time; every other import,
 * re-export, `import()` and `require()` of a literal name does. A pino transport is loaded by
 * name too (`target: '…'`), so a `target` given as a literal counts as well.
 */

const ROOT = fileURLToPath(new URL('../..', import.meta.url));
const pkg = JSON.parse(readFileSync(join(ROOT, 'package.json'), 'utf8')) as {
  dependencies: Record<string, string>;
};

function sourceFiles(dir: string): string[] {
  return readdirSync(join(ROOT, dir), { recursive: true, encoding: 'utf8' })
    .filter((name) => name.endsWith('.ts') && !name.endsWith('.d.ts'))
    .map((name) => join(dir, name));
}

/** Every module name `file` loads at run time, as written. */
function runtimeSpecifiers(file: string): string[] {
  const text = readFileSync(join(ROOT, file), 'utf8');
  const source = ts.createSourceFile(file, text, ts.ScriptTarget.Latest, true);
  const found: string[] = [];
  const visit = (node: ts.Node): void => {
    if (ts.isImportDeclaration(node) && !node.importClause?.isTypeOnly && ts.isStringLiteral(node.moduleSpecifier)) {
      found.push(node.moduleSpecifier.text);
    } else if (
      ts.isExportDeclaration(node) &&
      !node.isTypeOnly &&
      node.moduleSpecifier &&
      ts.isStringLiteral(node.moduleSpecifier)
    ) {
      found.push(node.moduleSpecifier.text);
    } else if (ts.isCallExpression(node)) {
      const [first] = node.arguments;
      const callee = node.expression;
      const loads =
        callee.kind === ts.SyntaxKind.ImportKeyword || (ts.isIdentifier(callee) && callee.text === 'require');
      if (loads && first && ts.isStringLiteral(first)) found.push(first.text);
    } else if (
      ts.isPropertyAssignment(node) &&
      ts.isIdentifier(node.name) &&
      node.name.text === 'target' &&
      ts.isStringLiteral(node.initializer)
    ) {
      found.push(node.initializer.text);
    }
    ts.forEachChild(node, visit);
  };
  visit(source);
  return found;
}

/** The package a bare specifier names (`@scope/name/sub` → `@scope/name`); undefined for relative paths and Node's own modules. */
function packageOf(specifier: string): string | undefined {
  if (specifier.startsWith('.') || specifier.startsWith('/') || specifier.startsWith('node:')) return undefined;
  const parts = specifier.split('/');
  const name = specifier.startsWith('@') ? parts.slice(0, 2).join('/') : (parts[0] as string);
  return builtinModules.includes(name) ? undefined : name;
}

describe('run-time dependencies', () => {
  // Parsed once for both tests: three hundred files.
  const loaded = [...sourceFiles('src'), ...sourceFiles('workers')].map(
    (file) => [file, runtimeSpecifiers(file)] as const,
  );

  it('finds the modules the sources load (the check reads what it should)', () => {
    const all = new Set(loaded.flatMap(([, specifiers]) => specifiers.map(packageOf)));
    // One of each kind: a plain import and a require().
    expect(all).toContain('fastify');
    expect(all).toContain('ajv');
  });

  it('are all in package.json dependencies, not only devDependencies', () => {
    const missing = loaded.flatMap(([file, specifiers]) =>
      specifiers
        .map(packageOf)
        .filter((name): name is string => name !== undefined && !(name in pkg.dependencies))
        .map((name) => `${file}: ${name}`),
    );
    expect(missing).toEqual([]);
  });
});
