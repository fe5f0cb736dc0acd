// stack.ts - the example's stack: a .NET API on Fargate behind a public
// load balancer, and an internal load balancer in front of the diagport
// agents that DiagportAspect (app.ts) adds to its task definition.
//
//   internet --:80--> public ALB --> api:8080      (two tasks, private subnets)
//   VPC only --:52323--> internal ALB --> diagport-agent:52323 (token required)

import * as path from "path";

import { Duration, RemovalPolicy, Stack, StackProps, Validations } from "aws-cdk-lib";
import * as ec2 from "aws-cdk-lib/aws-ec2";
import * as ecs from "aws-cdk-lib/aws-ecs";
import * as elbv2 from "aws-cdk-lib/aws-elasticloadbalancingv2";
import * as logs from "aws-cdk-lib/aws-logs";
import * as s3 from "aws-cdk-lib/aws-s3";
import * as secretsmanager from "aws-cdk-lib/aws-secretsmanager";
import { Construct } from "constructs";

import { DiagportAgentTarget } from "@diagport/cdk";

export const AGENT_PORT = 52323;

export class FargateApiStack extends Stack {
  /** The agents' bearer token: with it the agents serve the task network, and only with it. */
  public readonly agentToken: secretsmanager.Secret;

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
    // the token crosses the VPC in the clear unless the listener has a certificate: give one
    // with `-c agentCertificateArn=arn:aws:acm:...` (a certificate cannot be made offline)
    const certificateArn = this.node.tryGetContext("agentCertificateArn") as string | undefined;
    const agents = internalAlb.addListener("Agents", {
      port: AGENT_PORT,
      protocol: certificateArn ? elbv2.ApplicationProtocol.HTTPS : elbv2.ApplicationProtocol.HTTP,
      certificates: certificateArn ? [elbv2.ListenerCertificate.fromArn(certificateArn)] : undefined,
      open: false,
    });
    agents.connections.allowDefaultPortFrom(ec2.Peer.ipv4(vpc.vpcCidrBlock), "diagport agents, from the VPC");
    Validations.of(internalAlb).acknowledge({
      id: "AwsSolutions-EC23",
      reason: "The agents' load balancer admits the VPC's own CIDR block (a reference EC23 cannot evaluate), not the internet.",
    });
    agents.addTargets("Agent", {
      port: AGENT_PORT,
      protocol: elbv2.ApplicationProtocol.HTTP,
      targets: [new DiagportAgentTarget(service, { port: AGENT_PORT })],
      healthCheck: { path: "/healthz", healthyHttpCodes: "200" },
    });
  }
}
