// rules.ts - diagport's injection rules, the C code of `diagport inject cfn`,
// compiled to WebAssembly (lib/rules-wasm.cjs, built by `make cdk` from
// cdk/native/rules.c). One call is one CloudFormation macro event: a
// template of one task definition and the options as params in, the
// macro's response out. Loaded once per process, synchronously.

import * as path from "path";

interface RulesModule {
  _dp_rules(event: number, eventLen: number, outLen: number): number;
  _malloc(n: number): number;
  _free(p: number): void;
  HEAPU8: Uint8Array;
  HEAPU32: Uint32Array;
  UTF8ToString(p: number, maxBytes?: number): string;
}

/** The macro's response (the CloudFormation macro contract). */
export interface MacroResponse {
  readonly requestId: string;
  readonly status: "success" | "failure";
  readonly fragment?: any;
  readonly errorMessage?: string;
}

let loaded: RulesModule | undefined;

function rules(): RulesModule {
  if (loaded === undefined) {
    // eslint-disable-next-line @typescript-eslint/no-var-requires
    const factory = require(path.join(__dirname, "rules-wasm.cjs")) as () => RulesModule;
    loaded = factory();
  }
  return loaded;
}

/** Run one macro event (requestId, fragment, params) through the rules. */
export function runMacro(event: { requestId: string; fragment: unknown; params: Record<string, string> }): MacroResponse {
  const m = rules();
  const bytes = Buffer.from(JSON.stringify(event), "utf8");
  const ev = m._malloc(bytes.length + 1);
  const lenp = m._malloc(4);
  try {
    m.HEAPU8.set(bytes, ev);
    m.HEAPU8[ev + bytes.length] = 0;
    const out = m._dp_rules(ev, bytes.length, lenp);
    if (out === 0) {
      throw new Error("diagport: the rules' response did not fit in memory");
    }
    const len = m.HEAPU32[lenp >> 2];
    const text = Buffer.from(m.HEAPU8.subarray(out, out + len)).toString("utf8");
    m._free(out);
    return JSON.parse(text) as MacroResponse;
  } finally {
    m._free(ev);
    m._free(lenp);
  }
}
