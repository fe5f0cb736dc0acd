// macro.ts - DiagportMacro: diagport's CloudFormation macro deployed, the
// diagport binary (statically linked, named bootstrap) as a Lambda function
// on the provided.al2023 custom runtime plus the AWS::CloudFormation::Macro
// that names it. Templates in the account and region then add diagnostics
// with `Transform: diagport` or `Fn::Transform: {Name: diagport}`
// (docs/aws.md). The platform's policy (the `policy` prop) reaches the
// function as its DIAGPORT_POLICY variable, which it reads at cold start.

import * as fs from "fs";
import * as path from "path";

import { Duration } from "aws-cdk-lib";
import { CfnMacro } from "aws-cdk-lib/aws-cloudformation";
import * as lambda from "aws-cdk-lib/aws-lambda";
import { Construct } from "constructs";

export interface DiagportMacroProps {
  /** The macro's name, what templates put in Transform (default `diagport`). */
  readonly macroName?: string;
  /**
   * The function's code (default: the bootstrap shipped with this package,
   * built by `make lambda`, for x86_64).
   */
  readonly code?: lambda.Code;
  /**
   * Memory for the function in MiB (default 512: a realistic 5 MB template
   * peaks near 120 MB, and the worst 6 MiB event, millions of tiny values,
   * near 380 MB).
   */
  readonly memorySize?: number;
  /** Time allowed per invocation (default 30 seconds; a large template takes well under one). */
  readonly timeout?: Duration;
  /**
   * The platform's settings for every template the macro processes, in the
   * webhook's configuration format (docs/webhook.md, "Configuration"):
   * option defaults, which the templates' params override, and `enforce`,
   * option values that win over params and over every task definition's own
   * Metadata.diagport and tags, with a warning in the function's log
   * (CloudWatch) for each value it overrides; for example
   * `{ enforce: { auth: "required", ptrace: false, captures: "stacks,metrics,cpuprofile" } }`.
   * An object, or the path of a YAML or JSON file read at synth time. It is
   * the function's DIAGPORT_POLICY variable (at most 4 KB, Lambda's limit
   * for all of a function's variables); one the macro cannot read fails
   * every template with its reason. Default: none, every template's params
   * and settings are taken as they are.
   */
  readonly policy?: Record<string, unknown> | string;
}

/** The variable the macro reads its policy from (injector/inj_int.h INJ_MACRO_POLICY_VAR). */
export const MACRO_POLICY_VARIABLE = "DIAGPORT_POLICY";

/** Lambda's limit on the total size of a function's environment variables. */
const LAMBDA_ENV_LIMIT = 4096;

/** The policy prop as the variable's text: an object as JSON, a file's content as it is. */
function policyText(policy: Record<string, unknown> | string): string {
  let text: string;
  if (typeof policy === "string") {
    try {
      text = fs.readFileSync(policy, "utf8");
    } catch (e) {
      throw new Error(`DiagportMacro: policy: cannot read ${policy}: ${(e as Error).message}`);
    }
    if (text.trim() === "") {
      throw new Error(`DiagportMacro: policy: ${policy} is empty`);
    }
  } else if (policy !== null && typeof policy === "object" && !Array.isArray(policy)) {
    text = JSON.stringify(policy);
  } else {
    throw new Error("DiagportMacro: policy: an object of settings (the webhook's configuration format) or a file path");
  }
  const bytes = Buffer.byteLength(MACRO_POLICY_VARIABLE, "utf8") + Buffer.byteLength(text, "utf8");
  if (bytes > LAMBDA_ENV_LIMIT) {
    throw new Error(`DiagportMacro: policy: ${bytes} bytes as the variable ${MACRO_POLICY_VARIABLE}, over Lambda's ` +
      `${LAMBDA_ENV_LIMIT} for a function's variables; keep only the settings that matter (comments, defaults)`);
  }
  return text;
}

export class DiagportMacro extends Construct {
  /** The Lambda function that serves the macro. */
  public readonly function: lambda.Function;
  /** The AWS::CloudFormation::Macro resource. */
  public readonly macro: CfnMacro;
  /** The name templates use. */
  public readonly macroName: string;

  constructor(scope: Construct, id: string, props: DiagportMacroProps = {}) {
    super(scope, id);
    this.macroName = props.macroName ?? "diagport";
    const environment = props.policy === undefined ? undefined : { [MACRO_POLICY_VARIABLE]: policyText(props.policy) };
    this.function = new lambda.Function(this, "Function", {
      runtime: lambda.Runtime.PROVIDED_AL2023,
      architecture: lambda.Architecture.X86_64,
      handler: "bootstrap",
      code: props.code ?? lambda.Code.fromAsset(path.join(__dirname, "..", "lambda")),
      memorySize: props.memorySize ?? 512,
      timeout: props.timeout ?? Duration.seconds(30),
      environment,
      description: `diagport CloudFormation macro ${this.macroName}: adds .NET diagnostics to ECS task definitions`,
    });
    this.macro = new CfnMacro(this, "Macro", {
      name: this.macroName,
      functionName: this.function.functionArn,
      description: "Adds diagport's .NET diagnostics to AWS::ECS::TaskDefinition resources (diagport inject cfn)",
    });
  }
}
