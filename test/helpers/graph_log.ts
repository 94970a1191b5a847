/** The lines compile prints with TSORCH_LOGS=graph while `f` runs (console.error captured, env restored). */
export function graphLog(f: () => void): string {
  const logged: string[] = [];
  const original = console.error, before = process.env.TSORCH_LOGS;
  process.env.TSORCH_LOGS = "graph";
  console.error = (...a: unknown[]) => { logged.push(a.join(" ")); };
  try {
    f();
  } finally {
    console.error = original;
    if (before === undefined) delete process.env.TSORCH_LOGS;
    else process.env.TSORCH_LOGS = before;
  }
  return logged.join("\n");
}
