// macro.ts - DiagportMacro: diagport's CloudFormation macro deployed, the
// diagport binary (statically linked, named bootstrap) as a Lambda function
// on the provided.al2023 custom runtime plus the AWS::CloudFormation::Macro
// that names it. Templates in the account and region then add diagnostics
// with `Transform: diagport` or `Fn::Transform: {Name: diagport}`
// (docs/aws.md).

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
    this.function = new lambda.Function(this, "Function", {
      runtime: lambda.Runtime.PROVIDED_AL2023,
      architecture: lambda.Architecture.X86_64,
      handler: "bootstrap",
      code: props.code ?? lambda.Code.fromAsset(path.join(__dirname, "..", "lambda")),
      memorySize: props.memorySize ?? 512,
      timeout: props.timeout ?? Duration.seconds(30),
      description: `diagport CloudFormation macro ${this.macroName}: adds .NET diagnostics to ECS task definitions`,
    });
    this.macro = new CfnMacro(this, "Macro", {
      name: this.macroName,
      functionName: this.function.functionArn,
      description: "Adds diagport's .NET diagnostics to AWS::ECS::TaskDefinition resources (diagport inject cfn)",
    });
  }
}
