"""Prove a deployment: stacksync deployed, two stacks synced, every check one
line (PASS, FAIL with the AWS error, or SKIP with the reason), and everything
it made torn down again, also on Ctrl-C.

Against AWS (a profile and a region; never run by scripts/test): `sam build`
and `sam deploy` of template.yaml under a unique name, with a service role for
the stacks and two IAM roles to approve as (one among the installation's
Approvers, one not); two stacks registered from a public repository
(aws-cloudformation/aws-cloudformation-templates, SQS/SQSStandardQueue.json at a
pinned commit); then create, update, no-op, an out-of-band update put back,
an approval refused and one let through (the deployed run waits on its task
token; the CLI signs its answer as each role), drift detected and reverted
(the drift function and the scheduler invoked rather than waited for), delete,
and the teardown (the stacks, the installation and its retained table and
bucket, the roles). `sam deploy --resolve-s3` also makes (or re-uses) SAM's
own managed bucket and its stack, aws-sam-cli-managed-default, shared by
every `sam deploy` of the account and region: the teardown leaves those.

Against the emulator (`--endpoint URL`, what scripts/test runs so the script
cannot rot): the same template translated as `sam deploy` would and created in
the emulator's CloudFormation, the runs made by the local runner against its
table and bucket (the emulator runs no Lambda), a repository of its own on
disk. What the emulator cannot do is SKIPped, saying why: approvals through
the answer function (no Function URL: cli/tests/approval.rs tests them with a
loopback stand-in) and drift (no drift detection: tests/tests/drift.rs tests
it against a scripted CloudFormation).

Usage: scripts/smoke-aws --profile P --region R [--repo URL --ref REF --path P] [--keep]
       scripts/smoke-aws --endpoint http://127.0.0.1:PORT
"""
import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import uuid

import boto3
from botocore.exceptions import ClientError

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PUBLIC_REPO = "https://github.com/aws-cloudformation/aws-cloudformation-templates.git"
PUBLIC_REF = "661b8092f5121ad62f86baca35b439d35d7445d0"
PUBLIC_PATH = "SQS/SQSStandardQueue.json"
# The emulator's repository: a queue whose visibility timeout is a parameter.
LOCAL_TEMPLATE = """Parameters:
  VisibilityTimeout: {Type: Number, Default: 5}
  KmsMasterKeyIdForSqs: {Type: String, Default: ""}
Resources:
  SQSQueue:
    Type: AWS::SQS::Queue
    Properties:
      VisibilityTimeout: !Ref VisibilityTimeout
Outputs:
  QueueURL: {Value: !Ref SQSQueue}
"""


class Failed(Exception):
    """A check that did not hold: what was seen."""


class Smoke:
    def __init__(self, args):
        self.args = args
        self.emulator = bool(args.endpoint)
        self.name = f"stacksync-smoke-{uuid.uuid4().hex[:8]}"
        self.prefix = f"{self.name}-"
        session = boto3.session.Session(
            profile_name=None if self.emulator else args.profile,
            region_name=args.region,
        )
        self.session = session
        self.region = session.region_name or "us-east-1"
        client = lambda service: session.client(service, endpoint_url=args.endpoint)
        self.cfn = client("cloudformation")
        self.s3 = client("s3")
        self.ddb = client("dynamodb")
        self.iam = client("iam")
        self.sts = client("sts")
        self.lam = client("lambda")
        self.sqs = client("sqs")
        self.results = []
        self.made = {"roles": [], "stacks": [], "installation": None, "table": None, "bucket": None}
        self.table = self.bucket = None
        self.workdir = tempfile.mkdtemp(prefix="stacksync-smoke-")
        self.stacks = {"queue-a": f"{self.prefix}queue-a", "queue-b": f"{self.prefix}queue-b"}
        self.principals = {}

    # ---- reporting ----------------------------------------------------------
    def check(self, name, action):
        try:
            detail = action()
        except Failed as e:
            self.results.append(("FAIL", name, str(e)))
        except ClientError as e:
            self.results.append(("FAIL", name, f"AWS: {e}"))
        except Skip as e:
            self.results.append(("SKIP", name, str(e)))
        except Exception as e:  # noqa: BLE001 - a check's error is its failure
            self.results.append(("FAIL", name, f"{type(e).__name__}: {e}"))
        else:
            self.results.append(("PASS", name, detail or ""))
        verdict, _, said = self.results[-1]
        print(f"{verdict} {name}{': ' + said if said else ''}", flush=True)
        return verdict == "PASS"

    # ---- the CLI --------------------------------------------------------------
    def cli(self, *args, who=None, check=True):
        binary = self.args.stacksync or os.path.join(ROOT, "target", "debug", "stacksync")
        where = ["--table", self.table, "--bucket", self.bucket] if self.emulator else ["--installation", self.name]
        env = dict(os.environ, AWS_REGION=self.region, STACKSYNC_LOG="warn")
        if self.emulator:
            env["AWS_ENDPOINT_URL"] = self.args.endpoint
        elif self.args.profile:
            env["AWS_PROFILE"] = self.args.profile
        if who:
            env.pop("AWS_PROFILE", None)
            env.update(who)
        out = subprocess.run([binary, *where, *args], env=env, capture_output=True, text=True, timeout=1800)
        if check and out.returncode != 0:
            raise Failed(f"stacksync {' '.join(args)}: {out.stderr.strip() or out.stdout.strip()}")
        return out

    def entry(self, name):
        return json.loads(self.cli("get", name, "-o", "json").stdout)

    def reconcile(self, name):
        extra = ["--local"] if self.emulator else ["--wait"]
        return self.cli("reconcile", name, *extra)

    def apply(self, entries):
        path = os.path.join(self.workdir, "stacks.yaml")
        with open(path, "w") as f:
            json.dump({"stacks": entries}, f)
        self.cli("apply", "-f", path, "--prune", "--yes")

    def spec(self, key, visibility, **extra):
        entry = {
            "name": key,
            "stackName": self.stacks[key],
            "source": {"git": self.repo, "ref": self.ref, "path": self.path},
            "parameters": {"VisibilityTimeout": str(visibility), "KmsMasterKeyIdForSqs": ""},
            "destroyOnDelete": True,
            "pollInterval": "2s",
        }
        if self.service_role:
            entry["roleArn"] = self.service_role
        entry.update(extra)
        return entry

    def stack_parameter(self, key, parameter):
        stack = self.cfn.describe_stacks(StackName=self.stacks[key])["Stacks"][0]
        return {p["ParameterKey"]: p.get("ParameterValue") for p in stack.get("Parameters", [])}.get(parameter)

    # ---- set-up -------------------------------------------------------------
    def deploy(self):
        if self.emulator:
            return self.deploy_to_emulator()
        return self.deploy_to_aws()

    def deploy_to_emulator(self):
        sys.path.insert(0, os.path.join(ROOT, "scripts"))
        from structural_deploy import stage_code, translate

        plain, _, _ = translate(os.path.join(ROOT, "template.yaml"))
        stage_code(self.session, self.args.endpoint)
        self.made["installation"] = self.name
        self.cfn.create_stack(
            StackName=self.name,
            TemplateBody=json.dumps(plain),
            Capabilities=["CAPABILITY_IAM"],
            Parameters=[
                {"ParameterKey": "StackNamePrefix", "ParameterValue": self.prefix},
                {"ParameterKey": "RequireRoleArn", "ParameterValue": "false"},
            ],
        )
        self.read_outputs()
        self.service_role = None
        # A repository of its own, on disk (the local runner reads file://).
        repo = os.path.join(self.workdir, "repo")
        os.makedirs(repo)
        with open(os.path.join(repo, "queue.yaml"), "w") as f:
            f.write(LOCAL_TEMPLATE)
        for command in (["init", "-q", "-b", "main"], ["add", "."],
                        ["-c", "user.name=smoke", "-c", "user.email=smoke@example.com", "commit", "-q", "-m", "queue"]):
            subprocess.run(["git", *command], cwd=repo, check=True)
        self.repo, self.ref, self.path = f"file://{repo}", "main", "queue.yaml"
        return f"{self.name} created in the emulator's CloudFormation"

    def deploy_to_aws(self):
        account = self.sts.get_caller_identity()["Account"]
        self.service_role = self.role(
            f"{self.name}-cfn",
            {"Service": "cloudformation.amazonaws.com"},
            [{"Effect": "Allow", "Action": "sqs:*", "Resource": "*"}],
        )
        approver = self.role(f"{self.name}-approver", {"AWS": f"arn:aws:iam::{account}:root"}, [])
        bystander = self.role(f"{self.name}-bystander", {"AWS": f"arn:aws:iam::{account}:root"}, [])
        sam = subprocess.run([os.path.join(ROOT, "scripts", "venv"), "sam"], capture_output=True, text=True, check=True).stdout.strip()
        env = dict(os.environ, PATH=f"{sam}/bin:{os.environ['PATH']}", SAM_CLI_TELEMETRY="0")
        if self.args.profile:
            env["AWS_PROFILE"] = self.args.profile
        subprocess.run(["sam", "build", "--beta-features", "--parallel"], cwd=ROOT, env=env, check=True)
        self.made["installation"] = self.name
        overrides = [
            f"StackNamePrefix={self.prefix}",
            f"CloudFormationRoleArns={self.service_role}",
            "RequireRoleArn=true",
            f"Approvers={approver}",
        ]
        subprocess.run(
            ["sam", "deploy", "--stack-name", self.name, "--region", self.region, "--resolve-s3",
             "--capabilities", "CAPABILITY_IAM", "--no-confirm-changeset", "--no-fail-on-empty-changeset",
             "--parameter-overrides", *overrides],
            cwd=ROOT, env=env, check=True,
        )
        self.read_outputs()
        # What an approver needs (README "Who may approve"), for both roles:
        # the answer function itself tells them apart.
        answer = self.physical("AnswerFunction")
        answer_arn = f"arn:aws:lambda:{self.region}:{account}:function:{answer}"
        access = [
            {"Effect": "Allow", "Action": "lambda:InvokeFunctionUrl", "Resource": answer_arn,
             "Condition": {"StringEquals": {"lambda:FunctionUrlAuthType": "AWS_IAM"}}},
            # Only through the URL: a direct invocation could name any caller.
            {"Effect": "Allow", "Action": "lambda:InvokeFunction", "Resource": answer_arn,
             "Condition": {"Bool": {"lambda:InvokedViaFunctionUrl": "true"}}},
            {"Effect": "Allow", "Action": "dynamodb:GetItem", "Resource": f"arn:aws:dynamodb:{self.region}:{account}:table/{self.table}"},
            {"Effect": "Allow", "Action": "cloudformation:DescribeStacks", "Resource": "*"},
        ]
        for role in (approver, bystander):
            self.iam.put_role_policy(RoleName=role.split("/")[-1], PolicyName="approve", PolicyDocument=json.dumps(
                {"Version": "2012-10-17", "Statement": access}))
        self.principals = {"approver": approver, "bystander": bystander}
        self.repo, self.ref, self.path = self.args.repo, self.args.ref, self.args.path
        return f"{self.name} deployed with sam"

    def role(self, name, principal, statements):
        document = {"Version": "2012-10-17", "Statement": [
            {"Effect": "Allow", "Principal": principal, "Action": "sts:AssumeRole"}]}
        arn = self.iam.create_role(RoleName=name, AssumeRolePolicyDocument=json.dumps(document))["Role"]["Arn"]
        self.made["roles"].append(name)
        if statements:
            self.iam.put_role_policy(RoleName=name, PolicyName="stacks", PolicyDocument=json.dumps(
                {"Version": "2012-10-17", "Statement": statements}))
        return arn

    def read_outputs(self):
        described = self.cfn.describe_stacks(StackName=self.name)["Stacks"][0]
        if described["StackStatus"] not in ("CREATE_COMPLETE", "UPDATE_COMPLETE"):
            raise Failed(f"{self.name}: {described['StackStatus']} {described.get('StackStatusReason', '')}")
        outputs = {o["OutputKey"]: o["OutputValue"] for o in described.get("Outputs", [])}
        self.table, self.bucket = outputs["RegistryTableName"], outputs["ArtifactBucketName"]
        self.made["table"], self.made["bucket"] = self.table, self.bucket

    def physical(self, logical):
        return self.cfn.describe_stack_resource(StackName=self.name, LogicalResourceId=logical)[
            "StackResourceDetail"]["PhysicalResourceId"]

    def assumed(self, role):
        for _ in range(30):  # a new role takes a few seconds to be assumable
            try:
                creds = self.sts.assume_role(RoleArn=role, RoleSessionName="smoke")["Credentials"]
                return {"AWS_ACCESS_KEY_ID": creds["AccessKeyId"], "AWS_SECRET_ACCESS_KEY": creds["SecretAccessKey"],
                        "AWS_SESSION_TOKEN": creds["SessionToken"]}
            except ClientError:
                time.sleep(2)
        raise Failed(f"{role} cannot be assumed")

    # ---- the checks -------------------------------------------------------------
    def create(self):
        self.apply([self.spec("queue-a", 5), self.spec("queue-b", 5)])
        for key in self.stacks:
            self.reconcile(key)
            phase = self.entry(key)["status"]["phase"]
            if phase != "Ready":
                raise Failed(f"{key} is {phase}: {self.entry(key)['status'].get('message')}")
            self.made["stacks"].append(self.stacks[key])
        return "two stacks Ready"

    def update(self):
        self.apply([self.spec("queue-a", 10), self.spec("queue-b", 5)])
        self.reconcile("queue-a")
        value = self.stack_parameter("queue-a", "VisibilityTimeout")
        if value != "10":
            raise Failed(f"VisibilityTimeout is {value}, not 10")
        return "VisibilityTimeout 5 -> 10 through a change set"

    def no_op(self):
        self.reconcile("queue-a")
        message = self.entry("queue-a")["status"].get("message", "")
        if not message.startswith("in sync"):
            raise Failed(f"not in sync: {message}")
        return message

    def out_of_band(self):
        update = {"StackName": self.stacks["queue-a"], "UsePreviousTemplate": True, "Parameters": [
            {"ParameterKey": "VisibilityTimeout", "ParameterValue": "30"},
            {"ParameterKey": "KmsMasterKeyIdForSqs", "ParameterValue": ""}]}
        if self.service_role:
            update["RoleARN"] = self.service_role
        self.cfn.update_stack(**update)
        if not self.emulator:
            self.cfn.get_waiter("stack_update_complete").wait(StackName=self.stacks["queue-a"])
        self.reconcile("queue-a")
        value = self.stack_parameter("queue-a", "VisibilityTimeout")
        if value != "10":
            raise Failed(f"VisibilityTimeout is {value}: not put back to 10")
        return "a change made outside stacksync put back"

    def approvals(self):
        if self.emulator:
            raise Skip("the emulator serves no Lambda Function URL (cli/tests/approval.rs tests the answer function with a loopback stand-in)")
        self.apply([self.spec("queue-a", 10), self.spec("queue-b", 20, approval="always")])
        self.cli("reconcile", "queue-b")
        waiting = self.wait_for("queue-b", lambda s: s.get("awaiting"))
        change_set = waiting["awaiting"]["changeSet"]
        refused = self.cli("approve", "queue-b", "--change-set", change_set,
                           who=self.assumed(self.principals["bystander"]), check=False)
        if refused.returncode == 0 or "refused" not in refused.stderr:
            raise Failed(f"the bystander was not refused: {refused.stdout}{refused.stderr}")
        self.results.append(("PASS", "approval refused", refused.stderr.strip().splitlines()[-1]))
        print(f"PASS approval refused: {refused.stderr.strip().splitlines()[-1]}", flush=True)
        self.cli("approve", "queue-b", "--change-set", change_set, who=self.assumed(self.principals["approver"]))
        status = self.wait_for("queue-b", lambda s: s["phase"] == "Ready")
        by = status["approvals"][-1].get("by", "")
        if "approver" not in by:
            raise Failed(f"recorded approver {by!r}")
        return f"approved by {by}"

    def drift(self):
        if self.emulator:
            raise Skip("the emulator has no drift detection (tests/tests/drift.rs tests it against a scripted CloudFormation)")
        self.apply([self.spec("queue-a", 10, drift={"interval": "15m", "action": "revert"}), self.spec("queue-b", 20, approval="always")])
        self.reconcile("queue-a")
        url = self.sqs.get_queue_url(QueueName=self.queue_name("queue-a"))["QueueUrl"]
        self.sqs.set_queue_attributes(QueueUrl=url, Attributes={"VisibilityTimeout": "45"})
        drift, scheduler = self.physical("DriftFunction"), self.physical("SchedulerFunction")
        deadline = time.time() + 900
        while time.time() < deadline:
            self.lam.invoke(FunctionName=drift)
            record = self.entry("queue-a")["status"].get("drift") or {}
            if record.get("resources"):
                break
            time.sleep(20)
        else:
            raise Failed(f"no drift found: {self.entry('queue-a')['status'].get('drift')}")
        self.lam.invoke(FunctionName=scheduler)  # starts the revert run
        self.wait_for("queue-a", lambda s: s["phase"] == "Ready" and "drift put back" in s.get("message", ""))
        value = self.sqs.get_queue_attributes(QueueUrl=url, AttributeNames=["VisibilityTimeout"])["Attributes"]["VisibilityTimeout"]
        if value != "10":
            raise Failed(f"VisibilityTimeout is {value} after the revert")
        return "drift found by the drift function and put back by a REVERT_DRIFT change set"

    def queue_name(self, key):
        resources = self.cfn.describe_stack_resources(StackName=self.stacks[key])["StackResources"]
        url = next(r["PhysicalResourceId"] for r in resources if r["LogicalResourceId"] == "SQSQueue")
        return url.rsplit("/", 1)[-1]

    def wait_for(self, key, done, seconds=600):
        deadline = time.time() + seconds
        while time.time() < deadline:
            status = self.entry(key)["status"]
            if done(status):
                return status
            time.sleep(5)
        raise Failed(f"{key} is {self.entry(key)['status'].get('phase')}: {self.entry(key)['status'].get('message')}")

    def delete(self):
        self.apply([])
        for key in self.stacks:
            self.reconcile(key)
        left = [s for s in self.stacks.values() if self.stack_exists(s)]
        if left:
            raise Failed(f"still there: {left}")
        self.made["stacks"] = []
        return "both stacks deleted with their entries"

    def stack_exists(self, name):
        try:
            status = self.cfn.describe_stacks(StackName=name)["Stacks"][0]["StackStatus"]
        except ClientError:
            return False
        return status != "DELETE_COMPLETE"

    # ---- teardown -------------------------------------------------------------
    def teardown(self):
        problems = []

        def attempt(what, action):
            try:
                action()
            except Exception as e:  # noqa: BLE001 - every part is tried
                problems.append(f"{what}: {e}")

        # Every stack of this run that exists, Ready or not (a check may
        # have failed after its create began).
        for stack in dict.fromkeys([*self.made["stacks"], *self.stacks.values()]):
            attempt(f"stack {stack}", lambda s=stack: self.delete_stack(s))
        if self.made["installation"]:
            # A deploy that failed and rolled back keeps its retained table
            # and bucket, which no output names: read them off the stack.
            attempt("the installation's resources", self.find_retained)
            attempt("the installation", lambda: self.delete_stack(self.made["installation"]))
        if self.made["table"]:
            attempt(f"table {self.made['table']}", self.drop_table)
        if self.made["bucket"]:
            attempt(f"bucket {self.made['bucket']}", lambda: self.empty_bucket(self.made["bucket"]))
        for role in self.made["roles"]:
            def drop_role(r=role):
                for policy in self.iam.list_role_policies(RoleName=r)["PolicyNames"]:
                    self.iam.delete_role_policy(RoleName=r, PolicyName=policy)
                self.iam.delete_role(RoleName=r)
            attempt(f"role {role}", drop_role)
        # Checked, not assumed: every thing it made is gone.
        for stack in self.stacks.values():
            if self.stack_exists(stack):
                problems.append(f"stack {stack} is still there")
        if self.made["installation"] and self.stack_exists(self.made["installation"]):
            problems.append(f"the installation {self.made['installation']} is still there")
        if self.made["table"] and self.table_exists(self.made["table"]):
            problems.append(f"table {self.made['table']} is still there")
        if self.made["bucket"] and self.bucket_exists(self.made["bucket"]):
            problems.append(f"bucket {self.made['bucket']} is still there")
        if problems:
            raise Failed("; ".join(problems))
        return "nothing of the smoke test is left"

    def find_retained(self):
        if self.made["table"] and self.made["bucket"]:
            return
        if not self.stack_exists(self.made["installation"]):
            return
        paginator = self.cfn.get_paginator("list_stack_resources")
        for page in paginator.paginate(StackName=self.made["installation"]):
            for resource in page["StackResourceSummaries"]:
                physical = resource.get("PhysicalResourceId")
                if resource["LogicalResourceId"] == "RegistryTable" and physical:
                    self.made["table"] = self.made["table"] or physical
                if resource["LogicalResourceId"] == "ArtifactBucket" and physical:
                    self.made["bucket"] = self.made["bucket"] or physical

    def drop_table(self):
        table = self.made["table"]
        if not self.table_exists(table):
            return
        try:
            self.ddb.update_table(TableName=table, DeletionProtectionEnabled=False)
        except ClientError:
            pass  # not protected (DeleteTable says so if it is)
        # UPDATING until the change lands: DeleteTable refuses it meanwhile.
        self.ddb.get_waiter("table_exists").wait(TableName=table, WaiterConfig={"Delay": 2, "MaxAttempts": 60})
        self.ddb.delete_table(TableName=table)

    def table_exists(self, table):
        try:
            status = self.ddb.describe_table(TableName=table)["Table"]["TableStatus"]
        except ClientError:
            return False
        return status != "DELETING"

    def bucket_exists(self, bucket):
        try:
            self.s3.head_bucket(Bucket=bucket)
        except ClientError:
            return False
        return True

    def delete_stack(self, name):
        if not self.stack_exists(name):
            return
        self.cfn.delete_stack(StackName=name)
        if not self.emulator:
            self.cfn.get_waiter("stack_delete_complete").wait(StackName=name)

    def empty_bucket(self, bucket):
        try:
            # Its policy keeps everyone from deleting what the steps stored.
            self.s3.delete_bucket_policy(Bucket=bucket)
        except ClientError:
            pass
        paginator = self.s3.get_paginator("list_object_versions")
        for page in paginator.paginate(Bucket=bucket):
            objects = [{"Key": v["Key"], "VersionId": v["VersionId"]}
                       for v in page.get("Versions", []) + page.get("DeleteMarkers", [])]
            if objects:
                answer = self.s3.delete_objects(Bucket=bucket, Delete={"Objects": objects})
                if answer.get("Errors"):
                    first = answer["Errors"][0]
                    raise Failed(f"{len(answer['Errors'])} objects not deleted, first {first['Key']}: {first['Message']}")
        self.s3.delete_bucket(Bucket=bucket)


class Skip(Exception):
    """A check this backend cannot make: why."""


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--profile")
    parser.add_argument("--region", default=os.environ.get("AWS_REGION"))
    parser.add_argument("--endpoint", help="the local emulator's URL instead of AWS")
    parser.add_argument("--repo", default=PUBLIC_REPO)
    parser.add_argument("--ref", default=PUBLIC_REF)
    parser.add_argument("--path", default=PUBLIC_PATH)
    parser.add_argument("--stacksync", help="the stacksync binary (default: target/debug/stacksync)")
    parser.add_argument("--keep", action="store_true", help="leave everything in place (no teardown)")
    args = parser.parse_args()
    if args.endpoint:
        os.environ.setdefault("AWS_ACCESS_KEY_ID", "testing")
        os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "testing")
        args.region = args.region or "us-east-1"
    elif not args.region:
        parser.error("--region (or AWS_REGION) is required against AWS")
    os.environ["AWS_DEFAULT_REGION"] = args.region
    smoke = Smoke(args)

    def interrupted(signum, _frame):
        raise KeyboardInterrupt(f"signal {signum}")

    signal.signal(signal.SIGTERM, interrupted)
    try:
        if smoke.check("deploy", smoke.deploy):
            for name, step in [
                ("create", smoke.create),
                ("update", smoke.update),
                ("no-op", smoke.no_op),
                ("out-of-band update put back", smoke.out_of_band),
                ("approval by an approver", smoke.approvals),
                ("drift detected and reverted", smoke.drift),
                ("delete", smoke.delete),
            ]:
                smoke.check(name, step)
    except KeyboardInterrupt:
        print("interrupted: tearing down", flush=True)
    finally:
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        if not args.keep:
            smoke.check("teardown", smoke.teardown)
    failed = [r for r in smoke.results if r[0] == "FAIL"]
    counts = {v: sum(1 for r in smoke.results if r[0] == v) for v in ("PASS", "FAIL", "SKIP")}
    print(f"smoke: {counts['PASS']} passed, {counts['FAIL']} failed, {counts['SKIP']} skipped", flush=True)
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
