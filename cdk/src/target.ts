// target.ts - DiagportAgentTarget: the agent's port of an ECS service as a
// load balancer target, for an internal load balancer in front of the
// agents. The agent container is added at synthesis (DiagportAspect), after
// the service's own loadBalancerTarget would look for it, so this target
// registers it by name: what BaseService does for its own containers.

import * as ec2 from "aws-cdk-lib/aws-ec2";
import * as ecs from "aws-cdk-lib/aws-ecs";
import * as elbv2 from "aws-cdk-lib/aws-elasticloadbalancingv2";

/** The agent container's fixed name (docs/INJECTION.md). */
export const AGENT_CONTAINER = "diagport-agent";

export interface DiagportAgentTargetProps {
  /** The agent's port (default 52323): give the DiagportAspect's port if it sets another. */
  readonly port?: number;
}

/**
 * listener.addTargets("Agents", { port: 52323, protocol: elbv2.ApplicationProtocol.HTTPS,
 *   targets: [new DiagportAgentTarget(service)],
 *   healthCheck: { protocol: elbv2.Protocol.HTTPS, path: "/healthz" } })
 *
 * The agent serves the task's network only with a token (authSecret), and
 * TLS only with a certificate (tlsSecret): give the target group the
 * protocol the agents serve, HTTPS and an HTTPS health check with the
 * Aspect's tlsSecret, HTTP without (the agent is added at synthesis, so this
 * target cannot see which). The service's security group is opened to the
 * target group's load balancer on the agent's port.
 */
export class DiagportAgentTarget implements elbv2.IApplicationLoadBalancerTarget {
  private readonly port: number;

  constructor(private readonly service: ecs.BaseService, props: DiagportAgentTargetProps = {}) {
    this.port = props.port ?? 52323;
  }

  public attachToApplicationTargetGroup(targetGroup: elbv2.IApplicationTargetGroup): elbv2.LoadBalancerTargetProps {
    const lbs = (this.service as unknown as { loadBalancers: ecs.CfnService.LoadBalancerProperty[] }).loadBalancers;
    lbs.push({ targetGroupArn: targetGroup.targetGroupArn, containerName: AGENT_CONTAINER, containerPort: this.port });
    targetGroup.registerConnectable(this.service, ec2.Port.tcp(this.port));
    (this.service.node.defaultChild as ecs.CfnService).node.addDependency(targetGroup.loadBalancerAttached);
    const awsvpc = this.service.taskDefinition.networkMode === ecs.NetworkMode.AWS_VPC;
    return { targetType: awsvpc ? elbv2.TargetType.IP : elbv2.TargetType.INSTANCE };
  }
}
