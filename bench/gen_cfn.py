#!/usr/bin/env python3
"""Write a CloudFormation template with N resources (default 10,000): every tenth
an AWS::ECS::TaskDefinition with two containers, the rest a mix of other types.
Deterministic, so runs compare. Usage: gen_cfn.py N OUT.json"""
import json, sys

n = int(sys.argv[1]) if len(sys.argv) > 1 else 10000
res = {}
for i in range(n):
    if i % 10 == 0:
        res[f"Task{i}"] = {
            "Type": "AWS::ECS::TaskDefinition",
            "Properties": {
                "Family": f"svc-{i}", "Cpu": "512", "Memory": "2048", "NetworkMode": "awsvpc",
                "RequiresCompatibilities": ["FARGATE"],
                "ExecutionRoleArn": {"Fn::GetAtt": ["Role", "Arn"]},
                "ContainerDefinitions": [
                    {"Name": "app", "Image": {"Fn::Sub": "repo/app:${Tag}"}, "Memory": 1024,
                     "PortMappings": [{"ContainerPort": 8080}],
                     "Environment": [{"Name": f"K{k}", "Value": f"v{k}"} for k in range(10)]},
                    {"Name": "sidecar", "Image": "repo/sidecar:1", "MemoryReservation": 128},
                ],
            },
        }
    elif i % 3 == 0:
        res[f"Queue{i}"] = {"Type": "AWS::SQS::Queue", "Properties": {"VisibilityTimeout": 30, "Tags": [{"Key": "n", "Value": str(i)}]}}
    elif i % 3 == 1:
        res[f"Param{i}"] = {"Type": "AWS::SSM::Parameter", "Properties": {"Type": "String", "Value": {"Fn::Sub": "value-${AWS::Region}-" + str(i)}}}
    else:
        res[f"Topic{i}"] = {"Type": "AWS::SNS::Topic", "Properties": {"DisplayName": f"topic {i}"}}
json.dump({"AWSTemplateFormatVersion": "2010-09-09", "Parameters": {"Tag": {"Type": "String"}}, "Resources": res},
          open(sys.argv[2], "w"), indent=2)
