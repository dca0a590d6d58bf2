"""Structural deploy check of template.yaml, offline.

Translates the SAM template into plain CloudFormation with aws-sam-translator
(as `sam deploy` would), deploys it into the local AWS emulator (moto), and
checks that the resources exist: six functions, the table with its indexes,
the bucket, the state machine; and that the stack's outputs name them.

Usage: AWS_ENDPOINT_URL=... python scripts/structural_deploy.py template.yaml
"""
import json
import re
import os
import sys
import time

import boto3
import yaml
from samtranslator.model.exceptions import InvalidDocumentException
from samtranslator.translator.transform import transform


class _CfnLoader(yaml.SafeLoader):
    """YAML with CloudFormation's short tags (!Ref, !Sub, !GetAtt, ...)."""


def _tag(loader, suffix, node):
    name = "Ref" if suffix == "Ref" else f"Fn::{suffix}"
    if isinstance(node, yaml.ScalarNode):
        value = loader.construct_scalar(node)
        if suffix == "GetAtt":
            value = value.split(".", 1)
    elif isinstance(node, yaml.SequenceNode):
        value = loader.construct_sequence(node, deep=True)
    else:
        value = loader.construct_mapping(node, deep=True)
    return {name: value}


_CfnLoader.add_multi_constructor("!", _tag)


class _NoIam:
    """The policy loader asks IAM for AWS managed policies; none are used."""

    def load(self):
        return {}


def main(path):
    os.environ.setdefault("AWS_DEFAULT_REGION", os.environ.get("AWS_REGION", "us-east-1"))
    root = os.path.dirname(os.path.abspath(path))
    template = yaml.load(open(path), Loader=_CfnLoader)
    for name, resource in template["Resources"].items():
        props = resource.get("Properties", {})
        if resource["Type"] == "AWS::Serverless::Function":
            props["CodeUri"] = "s3://stacksync-code/stacksync.zip"
        if resource["Type"] == "AWS::Serverless::StateMachine" and "DefinitionUri" in props:
            props["Definition"] = json.load(open(os.path.join(root, props.pop("DefinitionUri"))))
    try:
        plain = transform(template, {}, _NoIam())
    except InvalidDocumentException as e:
        sys.exit("SAM translation failed: " + "; ".join(str(c) for c in e.causes))

    endpoint = os.environ["AWS_ENDPOINT_URL"]
    region = os.environ.get("AWS_REGION", "us-east-1")
    session = boto3.session.Session(region_name=region)
    s3 = session.client("s3", endpoint_url=endpoint)
    s3.create_bucket(Bucket="stacksync-code")
    s3.put_object(Bucket="stacksync-code", Key="stacksync.zip", Body=b"PK\x05\x06" + b"\x00" * 18)
    cfn = session.client("cloudformation", endpoint_url=endpoint)
    stack = f"stacksync-structural-{int(time.time())}"
    body = json.dumps(plain)
    cfn.create_stack(StackName=stack, TemplateBody=body, Capabilities=["CAPABILITY_IAM"])
    described = cfn.describe_stacks(StackName=stack)["Stacks"][0]
    if described["StackStatus"] != "CREATE_COMPLETE":
        sys.exit(f"{stack}: {described['StackStatus']} {described.get('StackStatusReason')}")
    resources = {r["LogicalResourceId"]: r for r in cfn.list_stack_resources(StackName=stack)["StackResourceSummaries"]}
    outputs = {o["OutputKey"]: o["OutputValue"] for o in described.get("Outputs", [])}
    problems = []

    lam = session.client("lambda", endpoint_url=endpoint)
    for fn in ["ArtifactFetch", "TemplateUpload", "ChangeSet", "PollStatus", "Delete", "Finalize"]:
        physical = resources.get(f"{fn}Function", {}).get("PhysicalResourceId")
        if not physical:
            problems.append(f"no function {fn}Function")
            continue
        config = lam.get_function(FunctionName=physical)["Configuration"]
        env = config.get("Environment", {}).get("Variables", {})
        if config["Runtime"] != "provided.al2023" or "STACKSYNC_TABLE" not in env or "STACKSYNC_BUCKET" not in env:
            problems.append(f"{fn}Function is misconfigured: {config['Runtime']} {sorted(env)}")

    table = outputs.get("RegistryTableName")
    ddb = session.client("dynamodb", endpoint_url=endpoint)
    indexes = {i["IndexName"] for i in ddb.describe_table(TableName=table)["Table"].get("GlobalSecondaryIndexes", [])}
    if indexes != {"by-next-reconcile", "by-source"}:
        problems.append(f"table {table} has indexes {sorted(indexes)}")
    bucket = outputs.get("ArtifactBucketName")
    if bucket not in {b["Name"] for b in s3.list_buckets()["Buckets"]}:
        problems.append(f"no bucket {bucket}")
    # moto keeps state machines made through CloudFormation apart from its
    # Step Functions API, so the wiring is checked in the translated template.
    machine = outputs.get("StateMachineArn", "")
    sm = resources.get("ReconcileStateMachine", {})
    if not machine.startswith("arn:") or sm.get("PhysicalResourceId") != machine:
        problems.append(f"StateMachineArn output {machine!r} is not the stack's state machine {sm}")
    sm_props = plain["Resources"]["ReconcileStateMachine"]["Properties"]
    definition = json.dumps(sm_props.get("Definition") or sm_props.get("DefinitionString"))
    placeholders = set(re.findall(r"\$\{(\w+)\}", definition))
    wired = {
        key: value
        for key, value in sm_props.get("DefinitionSubstitutions", {}).items()
        if isinstance(value, dict) and value.get("Fn::GetAtt", [""])[0].endswith("Function")
    }
    if not placeholders or placeholders != set(wired):
        problems.append(f"placeholders {sorted(placeholders)} vs functions wired {sorted(wired)}")

    if problems:
        sys.exit("structural deploy: " + "; ".join(problems))
    print(f"structural deploy: {len(resources)} resources created in the emulator; "
          "6 functions, table with 2 indexes, bucket, state machine wired to the functions")


if __name__ == "__main__":
    main(sys.argv[1])
