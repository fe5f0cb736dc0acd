// aspect.ts - DiagportAspect: diagnostics added to ECS task definitions at
// synthesis, by the rules of `diagport inject cfn` (rules.ts), never by rules
// of its own.
//
// For each AWS::ECS::TaskDefinition in scope (Fargate, EC2 or External; L2
// or L1) the Aspect resolves the resource as it stands, hands it to the
// rules as a template of one resource, and writes back only what the rules
// changed, as overrides on that resource. Every value the rules leave alone
// stays the construct's own, so tokens that resolve late (a cross-stack
// image reference, a secret) keep working; in a list the rules changed (the
// containers, the volumes), written back whole, each reference to another
// stack's resource is written back as the reference the construct held,
// which the CDK then turns into an export and an import.

import {
  AspectPriority,
  Annotations,
  Aspects,
  CfnResource,
  DefaultTokenResolver,
  IAspect,
  IPostProcessor,
  IResolvable,
  IResolveContext,
  Reference,
  Stack,
  StringConcat,
  Token,
  Tokenization,
} from "aws-cdk-lib";
import * as ecs from "aws-cdk-lib/aws-ecs";
import * as secretsmanager from "aws-cdk-lib/aws-secretsmanager";
import { IConstruct } from "constructs";

import { runMacro } from "./rules";

const TASKDEF = "AWS::ECS::TaskDefinition";

/**
 * The options of `diagport inject` (docs/INJECTION.md), by their CDK names.
 * Unset options take the CLI's defaults; a task definition's own
 * Metadata.diagport and diagport.dev/* tags override them, as they do for the
 * CLI and the macro.
 */
export interface DiagnosticsOptions {
  /** `nosuspend` (default) or `suspend`: the app waits at start until the agent has attached it. */
  readonly mode?: "nosuspend" | "suspend";
  /** The app containers to inject (default: every app container). */
  readonly containers?: string[];
  /**
   * Add SYS_PTRACE to the app containers (default false: dumps need no capability, see
   * docs/INJECTION.md "When SYS_PTRACE is needed").
   */
  readonly ptrace?: boolean;
  /** The agent's image (default ghcr.io/diagport/diagport:VERSION). */
  readonly image?: string;
  /** The agent's HTTP port (default 52323). */
  readonly port?: number;
  /** The agent's reservations and memory limit, `cpu=Q,memory=Q,memory-limit=Q`. */
  readonly resources?: string;
  /** The size limit of the dumps volume (default none). */
  readonly dumpsSizeLimit?: string;
  /** `diagport` (default) or `dotnet-monitor`. */
  readonly flavour?: "diagport" | "dotnet-monitor";
  /**
   * The agent's token, a Secrets Manager secret: with it the agent serves the
   * task's network (an internal load balancer, ECS Exec port forwarding), not
   * only loopback. Given as an ISecret, the task's execution role is granted
   * read on it.
   */
  readonly authSecret?: secretsmanager.ISecret | string;
  /**
   * The agent's certificate, a Secrets Manager secret whose value is the PEM
   * text of the certificate chain and its private key: with it the agent
   * serves `https://` (docs/INJECTION.md "TLS"). Given as an ISecret, the
   * task's execution role is granted read on it.
   */
  readonly tlsSecret?: secretsmanager.ISecret | string;
  /** false: serve the task's network without a token (never the default). */
  readonly auth?: boolean;
  /**
   * The capture kinds the agent serves (its `--captures`; default: all). A
   * platform's policy (`diagport inject --policy`) may allow fewer.
   */
  readonly captures?: Array<CaptureKind | "all">;
  /**
   * The dump the runtime writes into the dumps volume when an app crashes,
   * with its crash report (default `mini`, which fits any dumps-size-limit;
   * docs/INJECTION.md "Crash dumps"), or `off`.
   */
  readonly crashDumps?: CrashDumpType | "off";
}

/** The runtime's crash-dump types (the `crash-dumps` option, docs/INJECTION.md). */
export type CrashDumpType = "mini" | "heap" | "triage" | "full";

/** The agent's capture kinds (the `captures` option, docs/INJECTION.md). */
export type CaptureKind = "dump" | "gcdump" | "trace" | "cpuprofile" | "stacks" | "metrics" | "logs" | "env" | "exceptions";

export interface DiagportAspectProps extends DiagnosticsOptions {
  /**
   * true: only the task definitions that opt in (DiagportAspect.optIn, the
   * tag diagport.dev/inject, or Metadata.diagport.inject), as the CLI without
   * --all. Default false: every task definition the Aspect is added to.
   */
  readonly optedInOnly?: boolean;
}

/** The options as the macro's params: inject's option names, string values. */
export function optionParams(o: DiagnosticsOptions): Record<string, string> {
  const p: Record<string, string> = {};
  const set = (name: string, v: string | number | boolean | undefined) => {
    if (v !== undefined) p[name] = String(v);
  };
  set("mode", o.mode);
  set("containers", o.containers?.join(","));
  set("ptrace", o.ptrace);
  set("image", o.image);
  set("port", o.port);
  set("resources", o.resources);
  set("dumps-size-limit", o.dumpsSizeLimit);
  set("flavour", o.flavour);
  const arn = (x: secretsmanager.ISecret | string | undefined) => (typeof x === "string" ? x : x?.secretArn);
  set("auth-secret", arn(o.authSecret));
  set("tls-secret", arn(o.tlsSecret));
  if (o.auth === false) set("auth", "none");
  set("captures", o.captures?.join(","));
  set("crash-dumps", o.crashDumps);
  return p;
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === "object" && v !== null && !Array.isArray(v);
}

function same(a: unknown, b: unknown): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

// an override path segment: CDK splits override paths on periods, a backslash escapes
function seg(k: string): string {
  return k.replace(/[\\.]/g, (c) => "\\" + c);
}

/*
 * The overrides that turn a into b: [path, value], value undefined for a
 * deletion. Maps are walked key by key; a list that differs is replaced
 * whole (overriding one element of a list would turn a list that is
 * already overridden, by the user or an earlier visit, into a map); anything
 * else that differs is replaced whole.
 */
function overrides(a: unknown, b: unknown, at: string, out: Array<[string, unknown]>): void {
  if (same(a, b)) return;
  const dot = at === "" ? "" : at + ".";
  if (isObject(a) && isObject(b) && Object.keys(b).length > 0) {
    for (const k of Object.keys(b)) overrides(a[k], b[k], dot + seg(k), out);
    for (const k of Object.keys(a)) if (!(k in b)) out.push([dot + seg(k), undefined]);
    return;
  }
  out.push([at, b]);
}

/*
 * The resource with its Metadata.diagport options as the construct holds
 * them: an option that is a token (DiagportAspect.optIn with an ISecret) goes
 * to the rules as the token's string, which they copy where the option goes
 * and the CDK resolves when it writes the template, as with the Aspect's own
 * options; resolved, it would be a {"Ref": ...} the rules refuse.
 */
function withMetadataTokens(node: CfnResource, resource: any): any {
  const raw = node.getMetadata("diagport");
  const md = resource?.Metadata?.diagport;
  if (!isObject(raw) || !isObject(md)) return resource;
  const copy = { ...md };
  for (const [k, v] of Object.entries(raw)) {
    if (typeof v === "string" && Token.isUnresolved(v)) copy[k] = v;
  }
  return { ...resource, Metadata: { ...resource.Metadata, diagport: copy } };
}

/*
 * The references to other stacks' resources the task definition holds, by
 * what they resolve to now ({"Ref": ID}, {"Fn::GetAtt": [ID, A]}, the ID
 * the producing stack's): the CDK turns them into imports only after the
 * Aspects, so a value written back resolved would name a resource this
 * stack does not have. Found as the CDK finds them, by resolving the
 * resource with a resolver that remembers each token it meets.
 */
class RememberReferences extends DefaultTokenResolver {
  public readonly refs: Reference[] = [];

  constructor() {
    super(new StringConcat());
  }

  public resolveToken(t: IResolvable, context: IResolveContext, post: IPostProcessor): any {
    if (Reference.isReference(t)) this.refs.push(t);
    return super.resolveToken(t, context, post);
  }
}

function foreignReferences(node: CfnResource, stack: Stack): Map<string, IResolvable> {
  const r = new RememberReferences();
  Tokenization.resolve((node as any)._toCloudFormation(), { scope: node, resolver: r, preparing: true });
  const found = new Map<string, IResolvable>();
  for (const ref of r.refs) {
    if (Stack.of(ref.target) !== stack) found.set(JSON.stringify(stack.resolve(ref)), ref);
  }
  return found;
}

/* A value the rules wrote, each resolved foreign reference in it the reference again. */
function relink(v: unknown, foreign: Map<string, IResolvable>): unknown {
  if (foreign.size === 0) return v;
  const walk = (x: unknown): unknown => {
    if (Array.isArray(x)) return x.map(walk);
    if (!isObject(x)) return x;
    const ref = foreign.get(JSON.stringify(x));
    if (ref !== undefined) return ref;
    return Object.fromEntries(Object.keys(x).map((k) => [k, walk(x[k])]));
  };
  return walk(v);
}

/* An L2 task definition (duck-typed: another copy of aws-cdk-lib is another class), or undefined. */
function taskDefinitionOf(node: CfnResource): ecs.TaskDefinition | undefined {
  const td = node.node.scope as any;
  return td && typeof td.obtainExecutionRole === "function" ? (td as ecs.TaskDefinition) : undefined;
}

function isTaskDefinition(node: IConstruct): node is CfnResource {
  return CfnResource.isCfnResource(node) && node.cfnResourceType === TASKDEF;
}

/**
 * Adds diagport's diagnostics to the ECS task definitions under the scope it
 * is added to:
 *
 *   DiagportAspect.applyTo(app, { authSecret });
 *
 * A refusal by the rules (an intrinsic where a list must be extended, an
 * option value out of range) is an error on that task definition: synthesis
 * fails with the rules' message and the construct path.
 */
export class DiagportAspect implements IAspect {
  /**
   * The priority to add it with: a mutating Aspect that runs after the
   * default priority, where Tags.of applies tags (diagport.dev/* tags opt in,
   * out and set options) and other Aspects finish the task definitions, and
   * before the read-only ones (cdk-nag, policy checks), which then see the
   * agent.
   */
  public static readonly PRIORITY = AspectPriority.DEFAULT + 100;

  /** Add a DiagportAspect to scope, at DiagportAspect.PRIORITY. The one line. */
  public static applyTo(scope: IConstruct, props: DiagportAspectProps = {}): DiagportAspect {
    const aspect = new DiagportAspect(props);
    Aspects.of(scope).add(aspect, { priority: DiagportAspect.PRIORITY });
    return aspect;
  }

  /**
   * Opt one task definition in (for an Aspect with optedInOnly), with
   * options of its own that override the Aspect's: written to the
   * resource's Metadata.diagport, where the CLI and the macro read them too.
   */
  public static optIn(taskDefinition: ecs.TaskDefinition | CfnResource, options: DiagnosticsOptions = {}): void {
    const cfn = (CfnResource.isCfnResource(taskDefinition)
      ? taskDefinition
      : taskDefinition.node.defaultChild) as CfnResource;
    if (!cfn || cfn.cfnResourceType !== TASKDEF) {
      throw new Error(`DiagportAspect.optIn: ${taskDefinition.node.path} is not an ECS task definition`);
    }
    const td = CfnResource.isCfnResource(taskDefinition) ? taskDefinitionOf(taskDefinition) : taskDefinition;
    grantSecrets(cfn, td, options);
    cfn.addMetadata("diagport", { inject: true, ...optionParams(options) });
  }

  private readonly params: Record<string, string>;

  constructor(private readonly props: DiagportAspectProps = {}) {
    this.params = { ...optionParams(props), all: props.optedInOnly ? "false" : "true" };
  }

  public visit(node: IConstruct): void {
    if (!isTaskDefinition(node)) return;
    const stack = Stack.of(node);
    const rendered = stack.resolve((node as any)._toCloudFormation()) as { Resources?: Record<string, unknown> };
    const ids = Object.keys(rendered.Resources ?? {});
    if (ids.length !== 1) return; // not synthesized (shouldSynthesize false)
    const id = ids[0];
    // as JSON has it: a key whose value is undefined is no key (it would read as deleted)
    const before = JSON.parse(JSON.stringify(rendered.Resources![id]));
    const answer = runMacro({
      requestId: node.node.path,
      fragment: { Resources: { [id]: withMetadataTokens(node, before) } },
      params: this.params,
    });
    if (answer.status !== "success") {
      Annotations.of(node).addError(`diagport: ${answer.errorMessage}`);
      return;
    }
    const after = answer.fragment?.Resources?.[id];
    const edits: Array<[string, unknown]> = [];
    overrides(before, after, "", edits);
    const foreign = edits.length > 0 ? foreignReferences(node, stack) : new Map<string, IResolvable>();
    for (const [p, v] of edits) {
      if (v === undefined) node.addDeletionOverride(p);
      else node.addOverride(p, relink(v, foreign));
    }
    if (edits.length > 0) grantSecrets(node, taskDefinitionOf(node), this.props);
  }
}

/*
 * Each option given as an ISecret (auth-secret, tls-secret): the task's
 * execution role, with which ECS fetches a container's Secrets, may read it.
 * An ARN string grants nothing (the secret may live anywhere); an L1 task
 * definition has no role to grant to, and gets a warning per secret.
 */
function grantSecrets(node: CfnResource, td: ecs.TaskDefinition | undefined, o: DiagnosticsOptions): void {
  const given: Array<[string, secretsmanager.ISecret | string | undefined]> = [
    ["auth-secret", o.authSecret],
    ["tls-secret", o.tlsSecret],
  ];
  for (const [option, secret] of given) {
    if (secret === undefined || typeof secret === "string") continue;
    if (td !== undefined) {
      secret.grantRead(td.obtainExecutionRole());
    } else {
      Annotations.of(node).addWarningV2(
        `@diagport/cdk:${option}-grant`,
        `diagport: an L1 task definition: grant its execution role secretsmanager:GetSecretValue on the secret of its ${option} yourself`,
      );
    }
  }
}
