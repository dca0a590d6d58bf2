"""Structural deploy check of template.yaml, offline.

Translates the SAM template into plain CloudFormation with aws-sam-translator
(as `sam deploy` would), deploys it into the local AWS emulator (moto), and
checks that the resources exist: the seven step functions, the four
triggers (webhook, scheduler, drift, events) and the answer function
(IAM-authorised URL), the table with its four
indexes, the bucket, the state machine calling exactly the step functions;
the scheduler's and the drift function's EventBridge schedules and the
events function's four EventBridge rules, each
targeting its function, which lets EventBridge invoke it from that rule only;
that the stack's outputs name them; starts an execution by the
StateMachineArn output; and puts events through the deployed rules (in the
emulator's EventBridge) to see that only the managed stacks' status changes
and the source buckets' objects get through.

Usage: AWS_ENDPOINT_URL=... python scripts/structural_deploy.py template.yaml
"""
import json
import os
import sys
import time

import boto3
from botocore.exceptions import ClientError
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


def translate(path):
    """template.yaml as `sam deploy` would send it (aws-sam-translator), ready
    for the emulator: the functions' code a stand-in archive in the bucket
    `stacksync-code`, and the Function URLs (moto's CloudFormation cannot make
    AWS::Lambda::Url) gone, every reference to one a stand-in URL. Returns
    the plain template and the URL resources taken out (for checks)."""
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
    urls = {k: r for k, r in plain["Resources"].items() if r["Type"] == "AWS::Lambda::Url"}
    translated = json.loads(json.dumps(plain))
    for name in urls:
        del plain["Resources"][name]

    def stand_in(value):
        """A reference to a URL no longer there becomes a stand-in URL."""
        if isinstance(value, dict):
            if value.get("Fn::GetAtt", [None])[0] in urls:
                return "https://stand-in.lambda-url.localhost/"
            return {k: stand_in(v) for k, v in value.items()}
        if isinstance(value, list):
            return [stand_in(v) for v in value]
        return value

    plain["Resources"] = stand_in(plain["Resources"])
    plain["Outputs"] = stand_in(plain.get("Outputs", {}))
    return plain, translated, urls


def stage_code(session, endpoint):
    """The stand-in code archive every function's CodeUri names."""
    s3 = session.client("s3", endpoint_url=endpoint)
    s3.create_bucket(Bucket="stacksync-code")
    s3.put_object(Bucket="stacksync-code", Key="stacksync.zip", Body=b"PK\x05\x06" + b"\x00" * 18)
    return s3


def main(path):
    os.environ.setdefault("AWS_DEFAULT_REGION", os.environ.get("AWS_REGION", "us-east-1"))
    plain, translated, urls = translate(path)

    # moto's CloudFormation cannot create AWS::Lambda::Url: check the URLs in
    # the translated template (the deployed one has stand-ins instead).
    problems = []
    webhook_url = urls.get("WebhookFunctionUrl", {}).get("Properties", {})
    if webhook_url.get("AuthType") != "NONE" or webhook_url.get("TargetFunctionArn") != {"Ref": "WebhookFunction"}:
        problems.append(f"WebhookFunctionUrl is not a public URL of WebhookFunction: {webhook_url}")
    # The answer function's URL is IAM-authorised (the caller's identity
    # comes from AWS), and the approval step is told it (each wait records it).
    answer_url = urls.get("AnswerFunctionUrl", {}).get("Properties", {})
    if answer_url.get("AuthType") != "AWS_IAM" or answer_url.get("TargetFunctionArn") != {"Ref": "AnswerFunction"}:
        problems.append(f"AnswerFunctionUrl is not an IAM-authorised URL of AnswerFunction: {answer_url}")
    approval_env = translated["Resources"]["ApprovalFunction"]["Properties"]["Environment"]["Variables"]
    if approval_env.get("STACKSYNC_ANSWER_URL") != {"Fn::GetAtt": ["AnswerFunctionUrl", "FunctionUrl"]}:
        problems.append(f"the approval step is not told the answer URL: {approval_env}")

    endpoint = os.environ["AWS_ENDPOINT_URL"]
    region = os.environ.get("AWS_REGION", "us-east-1")
    session = boto3.session.Session(region_name=region)
    s3 = stage_code(session, endpoint)
    cfn = session.client("cloudformation", endpoint_url=endpoint)
    stack = f"stacksync-structural-{int(time.time())}"
    body = json.dumps(plain)
    parameters = {"StackNamePrefix": "acme-", "SourceBucketNames": "acme-sources,acme-more-sources"}
    cfn.create_stack(
        StackName=stack,
        TemplateBody=body,
        Capabilities=["CAPABILITY_IAM"],
        Parameters=[{"ParameterKey": k, "ParameterValue": v} for k, v in parameters.items()],
    )
    described = cfn.describe_stacks(StackName=stack)["Stacks"][0]
    if described["StackStatus"] != "CREATE_COMPLETE":
        sys.exit(f"{stack}: {described['StackStatus']} {described.get('StackStatusReason')}")
    resources = {r["LogicalResourceId"]: r for r in cfn.list_stack_resources(StackName=stack)["StackResourceSummaries"]}
    outputs = {o["OutputKey"]: o["OutputValue"] for o in described.get("Outputs", [])}

    lam = session.client("lambda", endpoint_url=endpoint)
    function_arns = set()
    trigger_env = {}
    steps = ["ArtifactFetch", "TemplateUpload", "ChangeSet", "PollStatus", "Approval", "Delete", "Finalize"]
    triggers = ["Webhook", "Scheduler", "Drift", "Events", "Answer", "Preview"]
    function_arn_of = {}
    for fn in steps + triggers:
        physical = resources.get(f"{fn}Function", {}).get("PhysicalResourceId")
        if not physical:
            problems.append(f"no function {fn}Function")
            continue
        config = lam.get_function(FunctionName=physical)["Configuration"]
        env = config.get("Environment", {}).get("Variables", {})
        function_arn_of[fn] = config["FunctionArn"]
        if fn in steps:
            function_arns.add(config["FunctionArn"])
        else:
            trigger_env[fn] = env
        if config["Runtime"] != "provided.al2023" or "STACKSYNC_TABLE" not in env or "STACKSYNC_BUCKET" not in env:
            problems.append(f"{fn}Function is misconfigured: {config['Runtime']} {sorted(env)}")
        # What the installation allows its entries reaches the steps (the deploy's parameters, and the defaults).
        policy = {k: env.get(k) for k in ("STACKSYNC_STACK_NAME_PREFIX", "STACKSYNC_SERVICE_ROLE_ARNS", "STACKSYNC_REQUIRE_ROLE_ARN")}
        if fn in steps and policy != {"STACKSYNC_STACK_NAME_PREFIX": "acme-", "STACKSYNC_SERVICE_ROLE_ARNS": "", "STACKSYNC_REQUIRE_ROLE_ARN": "true"}:
            problems.append(f"{fn}Function has the policy {policy}")
        # The public and event-driven triggers have concurrency of their own (the parameters' defaults).
        reserved = lam.get_function(FunctionName=physical).get("Concurrency", {}).get("ReservedConcurrentExecutions")
        want_reserved = {"Webhook": 10, "Events": 5}.get(fn)
        if reserved != want_reserved:
            problems.append(f"{fn}Function has reserved concurrency {reserved}, wants {want_reserved}")

    table = outputs.get("RegistryTableName")
    ddb = session.client("dynamodb", endpoint_url=endpoint)
    described = ddb.describe_table(TableName=table)["Table"].get("GlobalSecondaryIndexes", [])
    indexes = {i["IndexName"] for i in described}
    if indexes != {"by-next-reconcile", "by-source", "by-stack-name", "by-shard"}:
        problems.append(f"table {table} has indexes {sorted(indexes)}")
    for i in described:
        if i["IndexName"] == "by-shard" and i.get("Projection", {}).get("ProjectionType") != "INCLUDE":
            problems.append(f"index by-shard projects {i.get('Projection')}, not only what the health check reads")
    bucket = outputs.get("ArtifactBucketName")
    if bucket not in {b["Name"] for b in s3.list_buckets()["Buckets"]}:
        problems.append(f"no bucket {bucket}")
    # The state machine named by the output: its deployed definition must call
    # exactly the deployed functions, and it must accept an execution started
    # by that ARN (moto keeps machines made through CloudFormation in a backend
    # that does not run them, so the execution stays RUNNING: enough to prove
    # the output is what `stacksync reconcile` starts).
    machine = outputs.get("StateMachineArn", "")
    sm = resources.get("ReconcileStateMachine", {})
    if not machine.startswith("arn:") or sm.get("PhysicalResourceId") != machine:
        problems.append(f"StateMachineArn output {machine!r} is not the stack's state machine {sm}")
    else:
        sfn = session.client("stepfunctions", endpoint_url=endpoint)
        definition = json.loads(sfn.describe_state_machine(stateMachineArn=machine)["definition"])
        called = set()

        def collect(states):
            for state in states.values():
                if state.get("Type") == "Task":
                    # Through the Lambda integration (a task token), the
                    # function is named in the Parameters.
                    resource = state["Resource"]
                    if resource.startswith("arn:aws:states:::lambda:invoke"):
                        resource = state["Parameters"]["FunctionName"]
                    called.add(resource)
                for branch in state.get("Branches", []):
                    collect(branch["States"])

        collect(definition["States"])
        # moto stores the definition without applying DefinitionSubstitutions
        # (CloudFormation does): resolve each placeholder the way it would,
        # from the translated template's map and the deployed functions.
        subs = plain["Resources"]["ReconcileStateMachine"]["Properties"].get("DefinitionSubstitutions", {})
        physical_arn = {}
        for key, value in subs.items():
            logical = value.get("Fn::GetAtt", [None])[0] if isinstance(value, dict) else None
            physical = resources.get(logical, {}).get("PhysicalResourceId")
            if physical:
                physical_arn["${" + key + "}"] = lam.get_function(FunctionName=physical)["Configuration"]["FunctionArn"]
        called = {physical_arn.get(r, r) for r in called}
        if unresolved := [r for r in called if "${" in r]:
            problems.append(f"unsubstituted placeholders in the deployed definition: {unresolved}")
        elif called != function_arns:
            problems.append(f"the state machine calls {sorted(called)}, the stack has {sorted(function_arns)}")
        name = f"structural-{int(time.time())}"
        started = sfn.start_execution(stateMachineArn=machine, name=name, input=json.dumps({"stack": "probe"}))
        execution = sfn.describe_execution(executionArn=started["executionArn"])
        if execution["stateMachineArn"] != machine or execution["name"] != name:
            problems.append(f"execution started by the output ARN is not listed: {execution}")

    # The webhook starts the stack's own state machine (checked in the
    # translated template: moto drops that variable, whose Ref it resolves
    # after creating the function), and its URL is an output.
    webhook_env = plain["Resources"]["WebhookFunction"]["Properties"]["Environment"]["Variables"]
    if webhook_env.get("STACKSYNC_STATE_MACHINE_ARN") != {"Ref": "ReconcileStateMachine"}:
        problems.append(f"the webhook does not start ReconcileStateMachine: {webhook_env}")
    if "Webhook" not in trigger_env:
        problems.append("no webhook function deployed")
    policy_outputs = {k: outputs.get(k) for k in ("StackNamePrefix", "ServiceRoleArns", "RequireRoleArn")}
    if policy_outputs != {"StackNamePrefix": "acme-", "ServiceRoleArns": "-", "RequireRoleArn": "true"}:
        problems.append(f"the policy outputs are {policy_outputs}")
    if not outputs.get("WebhookUrl", "").startswith("http"):
        problems.append(f"WebhookUrl output is {outputs.get('WebhookUrl')!r}")

    # The scheduler and the events function start the same state machine;
    # the scheduler's cap is the MaxStartsPerRun parameter.
    for fn, extra in [("Scheduler", {"STACKSYNC_MAX_STARTS": {"Ref": "MaxStartsPerRun"}}), ("Events", {})]:
        env = plain["Resources"][f"{fn}Function"]["Properties"]["Environment"]["Variables"]
        want = {"STACKSYNC_STATE_MACHINE_ARN": {"Ref": "ReconcileStateMachine"}, **extra}
        if {k: env.get(k) for k in want} != want:
            problems.append(f"{fn}Function's environment is {env}, wants {want}")
        if fn not in trigger_env:
            problems.append(f"no {fn.lower()} function deployed")

    # The drift function starts nothing: it has no state machine to start,
    # and its cap is the MaxDriftDetections parameter.
    drift_env = plain["Resources"]["DriftFunction"]["Properties"]["Environment"]["Variables"]
    if "STACKSYNC_STATE_MACHINE_ARN" in drift_env or drift_env.get("STACKSYNC_MAX_DETECTIONS") != {"Ref": "MaxDriftDetections"}:
        problems.append(f"DriftFunction's environment is {drift_env}")
    if "Drift" not in trigger_env:
        problems.append("no drift function deployed")

    # The preview function starts nothing (no state machine in its
    # environment); the webhook tells it whether forks are previewed.
    preview_env = plain["Resources"]["PreviewFunction"]["Properties"].get("Environment", {}).get("Variables", {})
    if "STACKSYNC_STATE_MACHINE_ARN" in preview_env:
        problems.append(f"PreviewFunction's environment is {preview_env}")
    if webhook_env.get("STACKSYNC_PREVIEW_FORKS") != {"Ref": "PreviewForks"}:
        problems.append(f"the webhook does not read PreviewForks: {webhook_env}")
    # The webhook queues its deliveries and consumes the queue: its own
    # messages only, a failed one given again alone, then kept in the
    # dead-letter queue.
    if webhook_env.get("STACKSYNC_DELIVERY_QUEUE_URL") != {"Ref": "DeliveryQueue"}:
        problems.append(f"the webhook does not queue to DeliveryQueue: {webhook_env}")
    mappings = [r["Properties"] for r in plain["Resources"].values()
                if r["Type"] == "AWS::Lambda::EventSourceMapping"]
    consumer = [m for m in mappings if m.get("EventSourceArn") == {"Fn::GetAtt": ["DeliveryQueue", "Arn"]}]
    if len(consumer) != 1 or consumer[0].get("FunctionName") != {"Ref": "WebhookFunction"} \
            or consumer[0].get("FunctionResponseTypes") != ["ReportBatchItemFailures"]:
        problems.append(f"the delivery queue's consumer is {consumer}")
    redrive = plain["Resources"]["DeliveryQueue"]["Properties"].get("RedrivePolicy", {})
    if redrive.get("deadLetterTargetArn") != {"Fn::GetAtt": ["DeliveryDeadLetterQueue", "Arn"]}:
        problems.append(f"the delivery queue keeps no dead letters: {redrive}")
    if "DeliveryQueue" not in resources or "DeliveryDeadLetterQueue" not in resources:
        problems.append("the delivery queues are not deployed")

    if not outputs.get("AnswerUrl", "").startswith("http"):
        problems.append(f"AnswerUrl output is {outputs.get('AnswerUrl')!r}")

    # The EventBridge rules: in the translated template (the schedule is the
    # ScheduleExpression parameter) and as deployed (rule, target, and the
    # function's resource policy letting EventBridge invoke it from that rule).
    expected_rules = {
        "SchedulerFunctionSchedule": ("Scheduler", {"schedule": "rate(5 minutes)"}),
        "DriftFunctionSchedule": ("Drift", {"schedule": "rate(5 minutes)"}),
        "EventsFunctionCodeCommitPush": ("Events", {"pattern": {
            "source": ["aws.codecommit"],
            "detail-type": ["CodeCommit Repository State Change"],
            "detail": {"event": ["referenceCreated", "referenceUpdated"]},
        }}),
        "EventsFunctionS3ObjectCreated": ("Events", {"pattern": {
            "source": ["aws.s3"], "detail-type": ["Object Created"],
            "detail": {"bucket": {"name": ["acme-sources", "acme-more-sources"]}},
        }}),
        "EventsFunctionStackStatusChange": ("Events", {"pattern": {
            "source": ["aws.cloudformation"], "detail-type": ["CloudFormation Stack Status Change"],
            "detail": {"stack-id": [{"prefix": f"arn:aws:cloudformation:{region}:123456789012:stack/acme-"}]},
        }}),
        # A drift detection that ended: its findings read at once (by the
        # events function: the drift function starts no execution).
        "EventsFunctionDetectionEnded": ("Events", {"pattern": {
            "source": ["aws.cloudformation"], "detail-type": ["CloudFormation Drift Detection Status Change"],
            "detail": {"stack-id": [{"prefix": f"arn:aws:cloudformation:{region}:123456789012:stack/acme-"}],
                       "status-details": {"detection-status": ["DETECTION_COMPLETE", "DETECTION_FAILED"]}},
        }}),
        # Pushes the webhook relays (a registry source moved): this
        # installation's own, on its bus.
        "EventsFunctionRegistrySourcePushed": ("Events", {"pattern": {
            "source": ["stacksync"], "detail-type": ["Registry Source Pushed"],
            "detail": {"installation": [resources.get("RegistryTable", {}).get("PhysicalResourceId")]},
        }}),
        # Pull requests the webhook relays, and the runs a push started (a
        # status on the commit they deploy): this installation's, on its bus.
        "PreviewFunctionPullRequestChanged": ("Preview", {"pattern": {
            "source": ["stacksync"], "detail-type": ["Pull Request Changed"],
            "detail": {"installation": [resources.get("RegistryTable", {}).get("PhysicalResourceId")]},
        }}),
        "PreviewFunctionRunStatus": ("Preview", {"pattern": {
            "source": ["stacksync"],
            "detail-type": ["Reconcile Started", "Reconcile Succeeded", "Reconcile Failed", "Approval Requested"],
            "detail": {"installation": [resources.get("RegistryTable", {}).get("PhysicalResourceId")],
                       "trigger": ["webhook", "event"]},
        }}),
        # The pattern names the stack's own state machine (known once deployed).
        "EventsFunctionExecutionEnded": ("Events", {"pattern": {
            "source": ["aws.states"], "detail-type": ["Step Functions Execution Status Change"],
            "detail": {"status": ["ABORTED", "TIMED_OUT", "FAILED"],
                       "stateMachineArn": [resources.get("ReconcileStateMachine", {}).get("PhysicalResourceId")]},
        }}),
    }
    translated_rules = {k: r for k, r in plain["Resources"].items() if r["Type"] == "AWS::Events::Rule"}
    # The example rule for the runs' events is made only with a
    # NotificationTopicArn (none given here, so none deployed).
    notification = translated_rules.pop("NotificationRule", {})
    if notification.get("Condition") != "NotifiesTopic":
        problems.append(f"NotificationRule is not made on the NotifiesTopic condition: {notification}")
    if set(translated_rules) != set(expected_rules):
        problems.append(f"the translated template has the rules {sorted(translated_rules)}, wants {sorted(expected_rules)}")
    for rule_name in ("SchedulerFunctionSchedule", "DriftFunctionSchedule"):
        schedule = translated_rules.get(rule_name, {}).get("Properties", {}).get("ScheduleExpression")
        if schedule != {"Ref": "ScheduleExpression"}:
            problems.append(f"{rule_name} runs on {schedule!r}, not the ScheduleExpression parameter")
    events = session.client("events", endpoint_url=endpoint)
    deployed_rules = {k for k, r in resources.items() if r["ResourceType"] == "AWS::Events::Rule"}
    if deployed_rules != set(expected_rules):
        problems.append(f"the stack has the rules {sorted(deployed_rules)}, wants {sorted(expected_rules)}")
    policies = {}
    for logical, (fn, want) in expected_rules.items():
        physical = resources.get(logical, {}).get("PhysicalResourceId")
        target_arn = function_arn_of.get(fn)
        if not physical or not target_arn:
            continue
        rule = events.describe_rule(Name=physical)
        if rule.get("State") != "ENABLED":
            problems.append(f"{logical} is {rule.get('State')}")
        if "schedule" in want and rule.get("ScheduleExpression") != want["schedule"]:
            problems.append(f"{logical} runs on {rule.get('ScheduleExpression')!r}, wants {want['schedule']!r}")
        if "pattern" in want and json.loads(rule.get("EventPattern") or "null") != want["pattern"]:
            problems.append(f"{logical} matches {rule.get('EventPattern')}, wants {json.dumps(want['pattern'])}")
        targets = [t["Arn"] for t in events.list_targets_by_rule(Rule=physical)["Targets"]]
        if targets != [target_arn]:
            problems.append(f"{logical} targets {targets}, wants [{target_arn}]")
        if fn not in policies:
            try:
                policies[fn] = json.loads(lam.get_policy(FunctionName=target_arn)["Policy"])["Statement"]
            except ClientError as e:
                policies[fn] = []
                problems.append(f"{fn}Function has no resource policy: {e}")
        allowed = [
            st for st in policies[fn]
            if st.get("Principal") == {"Service": "events.amazonaws.com"}
            and st.get("Action") == "lambda:InvokeFunction"
            and st.get("Condition", {}).get("ArnLike", {}).get("AWS:SourceArn") == rule["Arn"]
        ]
        if len(allowed) != 1:
            problems.append(f"{fn}Function may not be invoked by EventBridge from {logical}: {policies[fn]}")

    problems += _events_filtered(session, endpoint, region, resources)

    if problems:
        sys.exit("structural deploy: " + "; ".join(problems))
    print(f"structural deploy: {len(resources)} resources created in the emulator; "
          "7 step functions, the webhook (URL in the outputs), the answer function (IAM-authorised URL), the scheduler and the drift function (schedule rules) and the events function "
          "(6 EventBridge rules: CodeCommit, S3, stack changes, drift detections ended, ended executions, relayed pushes; the example notification rule not made without its topic), the preview function (2 rules: relayed pull requests, runs a push started), table with 4 indexes, bucket, state machine calling the 7 functions, "
          "an execution started by the StateMachineArn output")


def _events_filtered(session, endpoint, region, resources):
    """Puts real-shaped events on the default bus: with a queue as the target
    of the deployed rules for a moment (the emulator cannot invoke the
    function), only the managed stacks' status changes and the source buckets'
    new objects arrive. The rules' own targets are put back after."""
    problems = []
    events = session.client("events", endpoint_url=endpoint)
    sqs = session.client("sqs", endpoint_url=endpoint)
    queue = sqs.create_queue(QueueName=f"structural-events-{int(time.time())}")["QueueUrl"]
    queue_arn = sqs.get_queue_attributes(QueueUrl=queue, AttributeNames=["QueueArn"])["Attributes"]["QueueArn"]
    saved = {}
    # Every rule of the bus that could see these events (a Lambda target would fail in the emulator).
    for rule in events.list_rules()["Rules"]:
        targets = events.list_targets_by_rule(Rule=rule["Name"])["Targets"]
        saved[rule["Name"]] = targets
        if targets:
            events.remove_targets(Rule=rule["Name"], Ids=[t["Id"] for t in targets])
    for logical in ("EventsFunctionStackStatusChange", "EventsFunctionS3ObjectCreated",
                    "EventsFunctionDetectionEnded"):
        events.put_targets(Rule=resources[logical]["PhysicalResourceId"], Targets=[{"Id": "probe", "Arn": queue_arn}])
    def stack_change(name):
        arn = f"arn:aws:cloudformation:{region}:123456789012:stack/{name}/5e3f7c20-1a2b-11ef-8c3d-0a1b2c3d4e5f"
        return {"Source": "aws.cloudformation", "DetailType": "CloudFormation Stack Status Change",
                "Resources": [arn], "Detail": json.dumps({"stack-id": arn, "status-details": {"status": "UPDATE_COMPLETE"}})}

    def new_object(bucket):
        return {"Source": "aws.s3", "DetailType": "Object Created", "Resources": [f"arn:aws:s3:::{bucket}"],
                "Detail": json.dumps({"bucket": {"name": bucket}, "object": {"key": "infra.zip"}})}

    def detection_ended(name, status):
        arn = f"arn:aws:cloudformation:{region}:123456789012:stack/{name}/5e3f7c20-1a2b-11ef-8c3d-0a1b2c3d4e5f"
        return {"Source": "aws.cloudformation", "DetailType": "CloudFormation Drift Detection Status Change",
                "Resources": [arn], "Detail": json.dumps({
                    "stack-id": arn, "stack-drift-detection-id": "7a1b2c3d-4e5f-11ef-9a8b-0a1b2c3d4e5f",
                    "status-details": {"stack-drift-status": "DRIFTED", "detection-status": status},
                    "drift-detection-details": {"drifted-stack-resource-count": 1}})}

    sent = {
        "acme-drifted": (detection_ended("acme-drifted", "DETECTION_COMPLETE"), True),
        "acme-detecting": (detection_ended("acme-detecting", "DETECTION_IN_PROGRESS"), False),
        "other-team-drifted": (detection_ended("other-team-drifted", "DETECTION_COMPLETE"), False),
        "acme-network": (stack_change("acme-network"), True),
        "other-team-app": (stack_change("other-team-app"), False),
        "acme-sources": (new_object("acme-sources"), True),
        "someone-elses-bucket": (new_object("someone-elses-bucket"), False),
    }
    events.put_events(Entries=[entry for entry, _ in sent.values()])
    arrived = set()
    for _ in range(10):
        batch = sqs.receive_message(QueueUrl=queue, MaxNumberOfMessages=10, WaitTimeSeconds=1).get("Messages", [])
        for message in batch:
            detail = json.loads(message["Body"])["detail"]
            arrived.add(detail.get("stack-id", "").split("/")[1] if "stack-id" in detail else detail["bucket"]["name"])
        if not batch and arrived:
            break
    for rule, targets in saved.items():
        events.remove_targets(Rule=rule, Ids=["probe"])
        if targets:
            events.put_targets(Rule=rule, Targets=targets)
    want = {name for name, (_, passes) in sent.items() if passes}
    if arrived != want:
        problems.append(f"the events rules let through {sorted(arrived)}, want exactly {sorted(want)}")
    return problems


if __name__ == "__main__":
    main(sys.argv[1])
