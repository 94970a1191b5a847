/**
 * The arithmetic of kernel metadata (shape rules, dispatch sizes, parameters): integers and
 * floats, names bound by the op's shape rules and scalars, + - * / % (/ on integers floors),
 * comparisons (== != < <= > >=, giving 1 or 0), parentheses and the functions ceil(a / b) →
 * cdiv(a, b), min, max. Nothing else: metadata is data, never code.
 */

/** Names an expression may use (dims, scalars) and functions of tensors (numel(x), offset(x)). */
export interface Scope {
  names: Record<string, number>;
  fns: Record<string, (arg: string) => number>;
}

const TOKEN = /\s*(?:(\d+(?:\.\d*)?(?:e[+-]?\d+)?)|([A-Za-z_][A-Za-z0-9_]*)|(==|!=|<=|>=|[-+*/%(),<>]))/y;

/** Evaluate `src` in `scope`; throws Error "bad kernel expression '<src>': <why>". */
export function evaluate(src: string, scope: Scope): number {
  const tokens: string[] = [];
  TOKEN.lastIndex = 0;
  while (TOKEN.lastIndex < src.length) {
    if (/^\s*$/.test(src.slice(TOKEN.lastIndex))) break;
    const m = TOKEN.exec(src);
    if (!m) throw new Error(`bad kernel expression '${src}': unexpected '${src.slice(TOKEN.lastIndex).trim()}'`);
    tokens.push(m[1] ?? m[2] ?? m[3]);
  }
  let at = 0;
  const fail = (why: string): never => { throw new Error(`bad kernel expression '${src}': ${why}`); };
  const eat = (t: string) => (tokens[at] === t ? (at++, true) : false);
  const cmp = (): number => {
    let v = sum();
    for (const op of ["==", "!=", "<=", ">=", "<", ">"]) {
      if (eat(op)) {
        const r = sum();
        v = Number({ "==": v === r, "!=": v !== r, "<=": v <= r, ">=": v >= r, "<": v < r, ">": v > r }[op]);
      }
    }
    return v;
  };
  const sum = (): number => {
    let v = product();
    for (;;) {
      if (eat("+")) v += product();
      else if (eat("-")) v -= product();
      else return v;
    }
  };
  const product = (): number => {
    let v = unary();
    for (;;) {
      if (eat("*")) v *= unary();
      else if (eat("/")) { const r = unary(); v = Number.isInteger(v) && Number.isInteger(r) ? Math.floor(v / r) : v / r; }
      else if (eat("%")) v %= unary();
      else return v;
    }
  };
  const unary = (): number => (eat("-") ? -unary() : atom());
  const atom = (): number => {
    const t = tokens[at++] ?? fail("unexpected end");
    if (/^\d/.test(t)) return Number(t);
    if (t === "(") { const v = cmp(); if (!eat(")")) fail("missing ')'"); return v; }
    if (/^[A-Za-z_]/.test(t)) {
      if (!eat("(")) return t in scope.names ? scope.names[t] : fail(`unknown name '${t}'`);
      if (t in scope.fns) {
        const arg = tokens[at++] ?? fail("unexpected end");
        if (!eat(")")) fail(`${t}() takes one tensor name`);
        return scope.fns[t](arg);
      }
      const args = [cmp()];
      while (eat(",")) args.push(cmp());
      if (!eat(")")) fail("missing ')'");
      if (t === "cdiv" && args.length === 2) return Math.ceil(args[0] / args[1]);
      if (t === "min") return Math.min(...args);
      if (t === "max") return Math.max(...args);
      return fail(`unknown function '${t}'`);
    }
    return fail(`unexpected '${t}'`);
  };
  const v = cmp();
  if (at !== tokens.length) fail(`unexpected '${tokens[at]}'`);
  return v;
}
