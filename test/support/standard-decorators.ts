import ts from 'typescript';
import type { Plugin } from 'vitest/config';

/**
 * Vite's own TypeScript transform leaves standard (TC39) decorators as they are, and Node 20
 * cannot run them: files that use one go through the TypeScript compiler first, which lowers
 * them. Every other file takes the usual path.
 */
export function standardDecorators(): Plugin {
  const decorator = /^\s*@[A-Za-z_$][\w$]*(?:[<(]|\s*$)/m;
  return {
    name: 'latchkey:standard-decorators',
    enforce: 'pre',
    transform(code, id) {
      if (!id.endsWith('.ts') || id.includes('/node_modules/') || !decorator.test(code)) return null;
      const out = ts.transpileModule(code, {
        fileName: id,
        compilerOptions: {
          target: ts.ScriptTarget.ES2022,
          module: ts.ModuleKind.ESNext,
          verbatimModuleSyntax: true,
          sourceMap: true,
        },
      });
      return { code: out.outputText, map: out.sourceMapText ?? null };
    },
  };
}
