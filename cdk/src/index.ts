// @diagport/cdk - diagport's .NET diagnostics for ECS task definitions in
// the AWS CDK: DiagportAspect adds them at synthesis with the rules of
// `diagport inject cfn` (compiled to WebAssembly), DiagportMacro deploys the
// CloudFormation macro. docs/aws.md describes both.

export { CrashDumpType, DiagportAspect, DiagportAspectProps, DiagnosticsOptions, optionParams } from "./aspect";
export { DiagportMacro, DiagportMacroProps, MACRO_POLICY_VARIABLE } from "./macro";
export { MacroResponse, runMacro } from "./rules";
export { AGENT_CONTAINER, DiagportAgentTarget, DiagportAgentTargetProps } from "./target";
