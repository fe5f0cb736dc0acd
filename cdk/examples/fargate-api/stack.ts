// stack.ts - the example's stack: a .NET API on Fargate behind a public
// load balancer, and an internal load balancer in front of the diagport
// agents that DiagportAspect (app.ts) adds to its task definition.
//
//   internet --:80--> public ALB --> api:8080      (two tasks, private subnets)
//   VPC only --https:52323--> internal ALB --https--> diagport-agent:52323 (token required)
//
// The agents' path is HTTPS end to end by default, and needs two inputs that
// cannot be made offline (see agentTls below and docs/aws.md):
//   -c agentCertificateArn=arn:aws:acm:REGION:ACCOUNT:certificate/ID   the listener's certificate
//   -c agentTlsSecretArn=arn:aws:secretsmanager:...:secret:NAME-XXXXXX the agents' certificate and key (PEM)
//   -c agentTlsSecretKeyArn=arn:aws:kms:...                            (optional) the customer key encrypting it
// Without them synthesis fails, naming what is missing; `-c agentTls=off`
// chooses clear text inside the VPC instead, with a warning at every synth.

import * as path from "path";

import { Duration, RemovalPolicy, Stack, StackProps, Token, Validations } from "aws-cdk-lib";
import * as ec2 from "aws-cdk-lib/aws-ec2";
import * as ecs from "aws-cdk-lib/aws-ecs";
import * as elbv2 from "aws-cdk-lib/aws-elasticloadbalancingv2";
import * as iam from "aws-cdk-lib/aws-iam";
import * as logs from "aws-cdk-lib/aws-logs";
import * as s3 from "aws-cdk-lib/aws-s3";
import * as secretsmanager from "aws-cdk-lib/aws-secretsmanager";
import { Construct } from "constructs";

import { DiagportAgentTarget } from "@diagport/cdk";

export const AGENT_PORT = 52323;

/** The agents' TLS inputs, from the context: what the listener and the agents serve. */
interface AgentTls {
  readonly certificateArn: string;
  readonly secret: secretsmanager.ISecret;
  /** The customer managed KMS key that encrypts the secret, if not Secrets Manager's own. */
  readonly keyArn?: string;
}

const CERTIFICATE_ARN = /^arn:aws[a-z-]*:acm:([a-z0-9-]+):\d{12}:certificate\/[A-Za-z0-9-]+$/;
// the complete ARN, with the six characters Secrets Manager adds to the name: the grant names it exactly
const SECRET_COMPLETE_ARN = /^arn:aws[a-z-]*:secretsmanager:[a-z0-9-]+:\d{12}:secret:[A-Za-z0-9/_+=.@-]+-[A-Za-z0-9]{6}$/;
const KEY_ARN = /^arn:aws[a-z-]*:kms:[a-z0-9-]+:\d{12}:key\/[A-Za-z0-9-]+$/;

export class FargateApiStack extends Stack {
  /** The agents' bearer token: with it the agents serve the task network, and only with it. */
  public readonly agentToken: secretsmanager.Secret;
  /**
   * The agents' certificate chain and key, one PEM text in Secrets Manager (the
   * DiagportAspect's tlsSecret, app.ts); undefined with `-c agentTls=off`.
   */
  public readonly agentTlsSecret?: secretsmanager.ISecret;

  constructor(scope: Construct, id: string, props?: StackProps) {
    super(scope, id, props);

    const flowLogs = new logs.LogGroup(this, "FlowLogs", {
      retention: logs.RetentionDays.ONE_MONTH,
      removalPolicy: RemovalPolicy.DESTROY,
    });
    const vpc = new ec2.Vpc(this, "Vpc", {
      maxAzs: 2,
      natGateways: 1,
      flowLogs: { all: { destination: ec2.FlowLogDestination.toCloudWatchLogs(flowLogs) } },
    });
    const tls = this.agentTls();
    this.agentTlsSecret = tls?.secret;

    const cluster = new ecs.Cluster(this, "Cluster", {
      vpc,
      containerInsightsV2: ecs.ContainerInsights.ENABLED,
    });

    this.agentToken = new secretsmanager.Secret(this, "AgentToken", {
      description: "Bearer token of the diagport agents (Authorization: Bearer <token>)",
      generateSecretString: { passwordLength: 48, excludePunctuation: true },
    });
    Validations.of(this.agentToken).acknowledge({
      id: "AwsSolutions-SMG4",
      reason: "The agents read the token when a task starts; rotating it means replacing the tasks, done by a deployment, not a rotation Lambda.",
    });

    const appLogs = new logs.LogGroup(this, "ApiLogs", {
      retention: logs.RetentionDays.ONE_MONTH,
      removalPolicy: RemovalPolicy.DESTROY,
    });
    const taskDefinition = new ecs.FargateTaskDefinition(this, "Api", {
      cpu: 512,
      memoryLimitMiB: 1024,
    });
    taskDefinition.addContainer("api", {
      containerName: "api",
      image: ecs.ContainerImage.fromAsset(path.join(__dirname, "..", "api")),
      user: "1654:1654",
      portMappings: [{ containerPort: 8080 }],
      logging: ecs.LogDrivers.awsLogs({ logGroup: appLogs, streamPrefix: "api" }),
    });

    // what cdk-nag's checks of the app cannot see (they read the constructs' properties, and the
    // Aspect's additions are overrides); tests/integration/cdk_app.sh checks the synthesized
    // template, where they are
    Validations.of(taskDefinition).acknowledge({
      id: "AwsSolutions-ECS2",
      reason: "The one environment variable is DOTNET_DiagnosticPorts, added by diagport: a socket path, not a secret; the agent's token comes from Secrets Manager.",
    });

    const service = new ecs.FargateService(this, "Service", {
      cluster,
      taskDefinition,
      desiredCount: 2,
      minHealthyPercent: 100,
      circuitBreaker: { rollback: true },
      vpcSubnets: { subnetType: ec2.SubnetType.PRIVATE_WITH_EGRESS },
      enableExecuteCommand: true,
    });

    Validations.of(taskDefinition.taskRole).acknowledge({
      id: "AwsSolutions-IAM5[Resource::*]",
      reason: "ECS Exec (enableExecuteCommand): the ssmmessages channel actions take no resource-level permissions.",
    });
    if (tls?.keyArn) {
      // the Aspect grants read on the secret (tlsSecret); a customer key of the secret's is the
      // stack's to grant (an imported key's grant through Secrets Manager is dropped by the CDK)
      taskDefinition.obtainExecutionRole().addToPrincipalPolicy(new iam.PolicyStatement({
        actions: ["kms:Decrypt"],
        resources: [tls.keyArn],
        conditions: { StringEquals: { "kms:ViaService": `secretsmanager.${tls.secret.secretArn.split(":")[3]}.amazonaws.com` } },
      }));
    }
    Validations.of(taskDefinition.obtainExecutionRole()).acknowledge({
      id: "AwsSolutions-IAM5[Resource::*]",
      reason: "ecr:GetAuthorizationToken, to pull the image asset, takes no resource-level permissions.",
    });

    const accessLogs = new s3.Bucket(this, "AccessLogs", {
      encryption: s3.BucketEncryption.S3_MANAGED,
      blockPublicAccess: s3.BlockPublicAccess.BLOCK_ALL,
      enforceSSL: true,
      removalPolicy: RemovalPolicy.DESTROY,
      autoDeleteObjects: true,
      lifecycleRules: [{ expiration: Duration.days(30) }],
    });
    Validations.of(this).acknowledge({
      id: "AwsSolutions-IAM4[Policy::arn:<AWS::Partition>:iam::aws:policy/service-role/AWSLambdaBasicExecutionRole]",
      reason: "The CDK's own provider that empties the access-log bucket on deletion (autoDeleteObjects) logs with the basic execution role.",
    });
    Validations.of(accessLogs).acknowledge({
      id: "AwsSolutions-S1",
      reason: "This bucket holds the load balancers' access logs; logging access to it would log into itself.",
    });

    // the API, public
    const publicAlb = new elbv2.ApplicationLoadBalancer(this, "PublicAlb", { vpc, internetFacing: true });
    publicAlb.logAccessLogs(accessLogs, "public");
    Validations.of(publicAlb).acknowledge({
      id: "AwsSolutions-EC23",
      reason: "The public load balancer serves the API to the internet on port 80.",
    });
    publicAlb.addListener("Http", { port: 80, open: true }).addTargets("Api", {
      port: 8080,
      targets: [service.loadBalancerTarget({ containerName: "api", containerPort: 8080 })],
      healthCheck: { path: "/healthz" },
    });

    // the agents, inside the VPC only: reached with the token from within the VPC
    // (a bastion, a VPN, a peered VPC), or from anywhere through ECS Exec port forwarding
    const internalAlb = new elbv2.ApplicationLoadBalancer(this, "AgentAlb", { vpc, internetFacing: false });
    internalAlb.logAccessLogs(accessLogs, "agents");
    // HTTPS end to end: the client verifies the listener's ACM certificate; the load balancer
    // speaks TLS to each agent, which serves its own certificate (tls-secret). A load balancer
    // does not verify a target's certificate (any certificate will do, self-signed or expired):
    // that hop is encrypted, not authenticated; what the load balancer trusts is the target group,
    // whose addresses ECS registers, and the service's security group, open to the load balancer
    // alone. Clients that reach an agent directly (diagport capture --target, diagport on ECS)
    // do verify its certificate, against the private CA that issued it (--cacert).
    const protocol = tls ? elbv2.ApplicationProtocol.HTTPS : elbv2.ApplicationProtocol.HTTP;
    const agents = internalAlb.addListener("Agents", {
      port: AGENT_PORT,
      protocol,
      certificates: tls ? [elbv2.ListenerCertificate.fromArn(tls.certificateArn)] : undefined,
      sslPolicy: tls ? elbv2.SslPolicy.RECOMMENDED_TLS : undefined,
      open: false,
    });
    agents.connections.allowDefaultPortFrom(ec2.Peer.ipv4(vpc.vpcCidrBlock), "diagport agents, from the VPC");
    Validations.of(internalAlb).acknowledge({
      id: "AwsSolutions-EC23",
      reason: "The agents' load balancer admits the VPC's own CIDR block (a reference EC23 cannot evaluate), not the internet.",
    });
    agents.addTargets("Agent", {
      port: AGENT_PORT,
      protocol,
      targets: [new DiagportAgentTarget(service, { port: AGENT_PORT })],
      healthCheck: {
        protocol: tls ? elbv2.Protocol.HTTPS : elbv2.Protocol.HTTP,
        path: "/healthz",
        healthyHttpCodes: "200",
      },
    });
  }

  /*
   * The agents' TLS inputs from the context, checked: both ARNs, well formed
   * (the listener's certificate in the stack's region, the secret's complete
   * ARN), or `agentTls=off` and neither. Anything else is an error at
   * synthesis, naming the context key; clear text is a warning at every synth.
   */
  private agentTls(): AgentTls | undefined {
    const ctx = (k: string): string | undefined => {
      const v = this.node.tryGetContext(k);
      return v === undefined || v === null || v === "" ? undefined : String(v);
    };
    const mode = ctx("agentTls");
    const certificateArn = ctx("agentCertificateArn");
    const secretArn = ctx("agentTlsSecretArn");
    const keyArn = ctx("agentTlsSecretKeyArn");
    const given = [
      ["agentCertificateArn", certificateArn],
      ["agentTlsSecretArn", secretArn],
      ["agentTlsSecretKeyArn", keyArn],
    ].filter(([, v]) => v !== undefined).map(([k]) => k);
    const v = Validations.of(this);
    if (mode === "off" || mode === "false") {
      if (given.length > 0) {
        v.addError("agent-tls-contradiction", `-c agentTls=off (clear text) and ${given.join(", ")} (TLS) together: give one or the other`);
      }
      v.addWarning(
        "agent-tls-off",
        "-c agentTls=off: the agents' load balancer listens with HTTP and speaks HTTP to the agents; their bearer token and every capture (dumps hold every secret of the app) cross the VPC in clear text",
      );
      return undefined;
    }
    if (mode !== undefined && mode !== "on" && mode !== "true") {
      v.addError("agent-tls-value", `-c agentTls=${mode}: on (the default) or off`);
      return undefined;
    }
    const missing: string[] = [];
    if (certificateArn === undefined) missing.push("-c agentCertificateArn=arn:aws:acm:REGION:ACCOUNT:certificate/ID (the listener's certificate, ACM)");
    if (secretArn === undefined) missing.push("-c agentTlsSecretArn=arn:aws:secretsmanager:REGION:ACCOUNT:secret:NAME-XXXXXX (the agents' certificate chain and key, one PEM text)");
    if (missing.length > 0) {
      v.addError(
        "agent-tls-missing",
        `the agents' load balancer is HTTPS end to end (client to listener, listener to agent), which needs ${missing.join(" and ")}; or -c agentTls=off for clear text inside the VPC (docs/aws.md)`,
      );
      return undefined;
    }
    const cert = CERTIFICATE_ARN.exec(certificateArn!);
    let ok = true;
    if (cert === null) {
      v.addError("agent-tls-certificate", `agentCertificateArn ${certificateArn}: not an ACM certificate ARN (arn:aws:acm:REGION:ACCOUNT:certificate/ID)`);
      ok = false;
    } else if (!Token.isUnresolved(this.region) && cert[1] !== this.region) {
      v.addError("agent-tls-certificate", `agentCertificateArn ${certificateArn}: a certificate of ${cert[1]}; a load balancer in ${this.region} takes one of its own region`);
      ok = false;
    }
    if (!SECRET_COMPLETE_ARN.test(secretArn!)) {
      v.addError("agent-tls-secret", `agentTlsSecretArn ${secretArn}: not the complete ARN of a secret (arn:aws:secretsmanager:REGION:ACCOUNT:secret:NAME-XXXXXX, as describe-secret prints it)`);
      ok = false;
    }
    if (keyArn !== undefined && !KEY_ARN.test(keyArn)) {
      v.addError("agent-tls-secret-key", `agentTlsSecretKeyArn ${keyArn}: not a KMS key ARN (arn:aws:kms:REGION:ACCOUNT:key/ID)`);
      ok = false;
    }
    if (!ok) return undefined;
    const secret = secretsmanager.Secret.fromSecretCompleteArn(this, "AgentTlsSecret", secretArn!);
    return { certificateArn: certificateArn!, secret, keyArn };
  }
}
