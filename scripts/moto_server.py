"""moto server, with DynamoDB's write atomicity restored.

moto applies a TransactWriteItems by deep-copying the table, checking and
writing item by item, and restoring the copy on failure -- with no lock. Two
concurrent transactions can then both pass a condition that DynamoDB would let
only one pass (seen here: two writers conditioned on the same specVersion both
"won"). DynamoDB serializes conditional writes on an item; this launcher gives
moto the same guarantee by running its DynamoDB write operations one at a time.
It also stamps a stack's LastUpdatedTime on update, as AWS does (moto sets
none), gives a stack an executed UPDATE change set's tags (moto kept the old), keeps one live stack per name (a CREATE change set for a stack in
REVIEW_IN_PROGRESS joins it; moto made a second stack of that name), lists
one stack's change sets in ListChangeSets (moto listed every stack's), and serializes CloudFormation's calls (moto's backend is not
thread-safe: concurrent CreateStack calls fail with a 500), lets EventBridge
events through a bus whose rules have a schedule or a Lambda target (moto
failed every PutEvents there with a 500), and makes Query on
an index with an INCLUDE or KEYS_ONLY projection cost what the projection
holds rather than whole items (same results: moto deep-copied each whole item
and rendered it to JSON before keeping the few attributes the index holds,
25 s for the scheduler's 10,000-stack health read), and answers drift
detection with a detection that fails, saying the emulator cannot detect
drift (moto has none: a 500). Everything else is moto
as released (requirements-dev.txt pins the version).

It can also forward Lambda invocations to real function processes (the
project's Rust binaries, unchanged): with STACKSYNC_LAMBDA_RUNTIME_PORT set, it
serves the Lambda Runtime API on 127.0.0.1:that port, and an Invoke of function
NAME (from moto's Step Functions interpreter or the API) waits for the process
started with AWS_LAMBDA_RUNTIME_API=http://127.0.0.1:PORT/NAME to answer.
Enable moto's interpreter with POST /moto-api/config
{"stepfunctions": {"execute_state_machine": true}, "lambda": {"use_docker": false}}.

Usage: MOTO_PORT=PORT python moto_server.py -H 127.0.0.1 -p PORT
(MOTO_PORT: moto's Step Functions interpreter calls Lambda on localhost:MOTO_PORT.)
"""
import functools
import inspect
import json
import os
import queue
import sys
import threading
import uuid
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from moto.dynamodb.models import DynamoDBBackend
from moto.server import main

_WRITE_LOCK = threading.RLock()


def _serialized(method):
    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        with _WRITE_LOCK:
            return method(*args, **kwargs)

    return wrapper


for _name in (
    "put_item",
    "update_item",
    "delete_item",
    "transact_write_items",
    "batch_write_item",
    "get_item",
    "transact_get_items",
):
    if hasattr(DynamoDBBackend, _name):
        setattr(DynamoDBBackend, _name, _serialized(getattr(DynamoDBBackend, _name)))

# ---- TransactWriteItems: unused ExpressionAttributeValues are refused --------
# AWS refuses a value no expression of the item uses, in a transaction as in
# UpdateItem; moto checks names there but not values, so a write that AWS
# refuses (every apply that updated an entry once did) passed here.
import re as _re
from moto.dynamodb.exceptions import MockValidationException as _Invalid
from moto.dynamodb.responses import DynamoHandler as _DynamoHandler


def _values_used(method):
    @functools.wraps(method)
    def wrapper(self):
        for item in self.body.get("TransactItems", []):
            for op in item.values():
                text = " ".join(
                    op.get(k) or ""
                    for k in ("UpdateExpression", "ConditionExpression")
                )
                used = set(_re.findall(r":[A-Za-z0-9_]+", text))
                for name in op.get("ExpressionAttributeValues") or {}:
                    if name not in used:
                        raise _Invalid(
                            "Value provided in ExpressionAttributeValues unused in "
                            f"expressions: keys: {{{name}}}"
                        )
        return method(self)

    return wrapper


_DynamoHandler.transact_write_items = _values_used(_DynamoHandler.transact_write_items)

# ---- Query through a narrow index: copy only what the index holds -----------
from moto.dynamodb.models import table as _table_module
from moto.dynamodb.models.dynamo_type import Item as _Item
import copy as _copy

_NARROW = threading.local()


def _narrow_projection(index):
    kind = (index.projection or {}).get("ProjectionType")
    if kind not in ("INCLUDE", "KEYS_ONLY"):
        return None
    keep = set(index.table_key_attrs) | {k["AttributeName"] for k in index.schema}
    if kind == "INCLUDE":
        keep |= set(index.projection.get("NonKeyAttributes", []))
    return keep


def _project(self, item):
    keep = _narrow_projection(self)
    if keep is None:
        return _original_project(self, item)
    return _Item(
        hash_key=item.hash_key,
        range_key=item.range_key,
        attrs={k: _copy.deepcopy(v) for k, v in item.attrs.items() if k in keep},
    )


class _QueryCopy:
    # moto's table module calls copy.deepcopy(results) before projecting;
    # within a query through a narrow index the projection copies instead.
    copy = staticmethod(_copy.copy)

    @staticmethod
    def deepcopy(value, memo=None):
        if getattr(_NARROW, "on", False):
            return list(value) if isinstance(value, list) else value
        return _copy.deepcopy(value, memo)


def _narrow_query(method):
    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        # Table.query(hash_key, range_comparison, range_objs, limit,
        # exclusive_start_key, scan_index_forward, projection_expressions,
        # index_name, ...)
        name = kwargs.get("index_name", args[7] if len(args) > 7 else None)
        index = next((i for i in self.all_indexes() if i.name == name), None)
        _NARROW.on = index is not None and _narrow_projection(index) is not None
        try:
            return method(self, *args, **kwargs)
        finally:
            _NARROW.on = False

    return wrapper


_original_project = _table_module.SecondaryIndex.project
_table_module.SecondaryIndex.project = _project
_table_module.copy = _QueryCopy
_table_module.Table.query = _narrow_query(_table_module.Table.query)

# ---- CloudFormation's LastUpdatedTime ----------------------------------------
# AWS sets a stack's LastUpdatedTime on every update (UpdateStack, or an
# executed UPDATE change set) and reports it in DescribeStacks and ListStacks;
# moto sets none, so an update out of band would look like no change at all.
# Stamped here on both ways of updating; moto's serializer then reports the
# attribute `last_updated_time` in both responses.

from moto.cloudformation.models import CloudFormationBackend, Stack
from moto.cloudformation.exceptions import ValidationError
from moto.cloudformation.models import ChangeSet
from moto.cloudformation.utils import generate_changeset_id, validate_create_change_set
from moto.core.utils import utcnow


def _stamps_update(method):
    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        result = method(self, *args, **kwargs)
        self.last_updated_time = utcnow()
        return result

    return wrapper


def _stamps_executed_update(method):
    @functools.wraps(method)
    def wrapper(self, change_set_name, stack_name=None):
        change_set = self.change_sets.get(change_set_name) or next(
            (cs for cs in self.change_sets.values() if cs.change_set_name == change_set_name),
            None,
        )
        result = method(self, change_set_name, stack_name)
        # AWS computes the stack's outputs from the template it executed;
        # moto computes them only on CreateStack/UpdateStack, so a stack
        # made or updated through a change set had none (or its first).
        stack = self.stacks.get(change_set.stack_id) if change_set is not None else None
        if stack is not None:
            stack._parse_template()
            stack.output_map = stack._create_output_map()
        if change_set is not None and change_set.change_set_type == "UPDATE":
            stack = self.stacks.get(change_set.stack_id)
            if stack is not None:
                stack.last_updated_time = utcnow()
                # AWS gives the stack the change set's tags (moto keeps the old).
                if change_set.tags:
                    stack.tags = dict(change_set.tags)
        return result

    return wrapper


Stack.update = _stamps_update(Stack.update)


def _versioned_template_url(template_url, account_id, partition):
    """A TemplateURL that names a version (`?versionId=`) gets that version,
    as in AWS; moto reads the key's current object whatever the query says.
    A version that does not exist is an error, as in AWS."""
    from urllib.parse import parse_qs, urlparse

    from moto.s3.models import s3_backends

    url = urlparse(template_url)
    version = parse_qs(url.query).get("versionId", [None])[0]
    if version is None:
        return _moto_template_from_url(template_url, account_id, partition)
    bucket_name, key_name = url.path.lstrip("/").split("/", 1)
    key = s3_backends[account_id][partition].get_object(bucket_name, key_name, version_id=version)
    if key is None:
        raise ValidationError(
            message=f"S3 error: The specified version does not exist: {template_url}"
        )
    return key.value.decode("utf-8")


import moto.cloudformation.models as _cfn_models
import moto.cloudformation.responses as _cfn_responses
import moto.cloudformation.utils as _cfn_utils

_moto_template_from_url = _cfn_utils.get_stack_from_s3_url
_cfn_models.get_stack_from_s3_url = _versioned_template_url
_cfn_responses.get_stack_from_s3_url = _versioned_template_url

def _one_stack_per_name(method):
    """CreateChangeSet of type CREATE for a name whose stack waits in
    REVIEW_IN_PROGRESS (a change set made and never executed) adds the change
    set to that stack, as AWS does; moto makes a second stack of the same
    name, and DescribeStacks then answers with either. A name whose stack is
    live in any other status is refused, as AWS refuses it."""
    signature = inspect.signature(method)

    @functools.wraps(method)
    def wrapper(self, *args, **kwargs):
        call = signature.bind(self, *args, **kwargs)
        call.apply_defaults()
        a = call.arguments
        if a["change_set_type"] != "CREATE":
            return method(self, *args, **kwargs)
        live = [
            s for s in self.stacks.values()
            if s.name == a["stack_name"] and s.status != "DELETE_COMPLETE"
        ]
        if any(s.status != "REVIEW_IN_PROGRESS" for s in live):
            raise ValidationError(
                message=f"Stack [{a['stack_name']}] already exists and cannot be created "
                f"again with the changeSet [{a['change_set_name']}]."
            )
        if not live:
            return method(self, *args, **kwargs)
        stack = live[0]
        validate_create_change_set(a["change_set_name"])
        change_set_id = generate_changeset_id(
            a["change_set_name"], self.region_name, self.account_id
        )
        change_set = ChangeSet(
            change_set_type="CREATE",
            change_set_id=change_set_id,
            change_set_name=a["change_set_name"],
            stack=stack,
            template=a["template"],
            parameters=a["parameters"],
            description=a["description"],
            notification_arns=a["notification_arns"],
            tags=a["tags"],
            role_arn=a["role_arn"],
        )
        change_set.status = "CREATE_COMPLETE"
        change_set.execution_status = "AVAILABLE"
        self.change_sets[change_set_id] = change_set
        return change_set_id, stack.stack_id

    return wrapper


CloudFormationBackend.create_change_set = _one_stack_per_name(
    CloudFormationBackend.create_change_set
)
CloudFormationBackend.execute_change_set = _stamps_executed_update(
    CloudFormationBackend.execute_change_set
)

# ---- ListChangeSets: one stack's change sets ---------------------------------
# AWS's ListChangeSets "returns the ID and status of each active change set
# for a stack" (StackName, required: a name or a StackId); moto 5.2.5 returns
# every change set of every stack, so a check of "no change set left on this
# stack" saw other stacks' (a preview's clean-up kept a placeholder, a test
# saw another test's change set). Filtered here by the stack named, as AWS.


def _list_change_sets(self):
    named = self._get_param("StackName")
    change_sets = [
        cs for cs in self.cloudformation_backend.list_change_sets()
        if named in (cs.stack_name, cs.stack_id)
    ]
    return _cfn_responses.ActionResult({"Summaries": change_sets})


_cfn_responses.CloudFormationResponse.list_change_sets = _list_change_sets

# moto's CloudFormation backend is not thread-safe either: CreateStack walks
# every stack to check the name while another request adds one ("OrderedDict
# mutated during iteration", a 500), and ListStacks copies the dict while it
# changes. AWS serves concurrent calls; the emulator's threads take turns here.
_CFN_LOCK = threading.RLock()


def _cfn_serialized(method):
    @functools.wraps(method)
    def wrapper(*args, **kwargs):
        with _CFN_LOCK:
            return method(*args, **kwargs)

    return wrapper


for _name, _method in list(vars(CloudFormationBackend).items()):
    if callable(_method) and not _name.startswith("_") and not isinstance(_method, (staticmethod, classmethod)):
        setattr(CloudFormationBackend, _name, _cfn_serialized(_method))

# ---- CloudFormation drift detection: answered, never faked -------------------
# moto has no drift detection (DetectStackDrift and its two readers are
# unknown actions: a 500). Here a detection can be started, and it ends
# DETECTION_FAILED at once, saying the emulator cannot detect drift: what a
# detection reports when it could not check the stack. Nothing is ever
# reported in sync or drifted. (The scheduler's drift pass then records the
# reason and waits for the stack's next slot; drift findings are tested
# against the scripted CloudFormation.)
from moto.cloudformation.responses import CloudFormationResponse

_CFN_NS = "http://cloudformation.amazonaws.com/doc/2010-05-15/"
_DETECTIONS = {}


def _cfn_reply(action, result):
    return (
        f'<{action}Response xmlns="{_CFN_NS}"><{action}Result>{result}</{action}Result>'
        f"<ResponseMetadata><RequestId>{uuid.uuid4()}</RequestId></ResponseMetadata>"
        f"</{action}Response>"
    )


def _detect_stack_drift(self):
    name = self._get_param("StackName")
    stack = self.cloudformation_backend.get_stack(name)
    detection = str(uuid.uuid4())
    _DETECTIONS[detection] = stack.stack_id
    return _cfn_reply("DetectStackDrift", f"<StackDriftDetectionId>{detection}</StackDriftDetectionId>")


def _describe_stack_drift_detection_status(self):
    detection = self._get_param("StackDriftDetectionId")
    stack_id = _DETECTIONS.get(detection, "")
    return _cfn_reply(
        "DescribeStackDriftDetectionStatus",
        f"<StackId>{stack_id}</StackId><StackDriftDetectionId>{detection}</StackDriftDetectionId>"
        "<DetectionStatus>DETECTION_FAILED</DetectionStatus>"
        "<DetectionStatusReason>the emulator (moto) does not detect drift</DetectionStatusReason>"
        "<Timestamp>2026-01-01T00:00:00Z</Timestamp>",
    )


def _describe_stack_resource_drifts(self):
    return _cfn_reply("DescribeStackResourceDrifts", "<StackResourceDrifts></StackResourceDrifts>")


CloudFormationResponse.detect_stack_drift = _detect_stack_drift
CloudFormationResponse.describe_stack_drift_detection_status = _describe_stack_drift_detection_status
CloudFormationResponse.describe_stack_resource_drifts = _describe_stack_resource_drifts

# ---- EventBridge: rules that match no event, targets moto cannot call -------
# On AWS a rule with a schedule and no pattern matches no event put on its bus,
# and every event an event pattern matches reaches its targets, whatever they
# are. moto matches a schedule-only rule against every event (an empty pattern
# matches all), then raises NotImplementedError for a target it cannot call (a
# Lambda function): one such rule on the default bus (the scheduler's, once the
# installation is deployed here) failed every PutEvents to that bus with a 500.
# Here a schedule-only rule matches nothing, and a target moto cannot call is
# passed over (as if called), the others served as moto serves them.
from moto.events.models import Rule as _EventsRule

_moto_send_to_targets = _EventsRule.send_to_targets


def _send_to_targets(self, original_event, transform_input=True):
    if self.scheduled_expression and not self.event_pattern.get_pattern():
        return
    for target in list(self.targets):
        single = _EventsRule.__new__(_EventsRule)
        single.__dict__.update(self.__dict__)
        single.targets = [target]
        try:
            _moto_send_to_targets(single, original_event, transform_input)
        except NotImplementedError:
            pass


_EventsRule.send_to_targets = _send_to_targets

# AWS delivers every event to a target with its `account` (EventBridge's
# "Amazon EventBridge events" structure: "account: the 12-digit number
# identifying an AWS account"); moto 5.2.5's default input template
# (moto/events/utils.py) leaves it out, so an SQS target receives events
# without it. The template, with the account.
from moto.events.utils import EventTemplateParser as _EventTemplateParser

_EventTemplateParser.DEFAULT_EVENT_INPUT_TEMPLATE = (
    '{"id": "<id>", "time": <time>, "version": "0", "detail-type": "<detail-type>", '
    '"source": "<source>", "account": "<account>", "region": "<region>", '
    '"resources": <resources>, "detail": <detail>}'
)

# ---- Step Functions: a task failed with its cause ------------------------------
# AWS's SendTaskFailure takes an `error` and a `cause`, and the failed task
# (its Catch, its execution) carries both; moto's handler passes the error
# alone, so every Catch saw `Cause: null` (the finalize step then refused
# its input). Here the cause is passed on too.
from moto.core.responses import EmptyResult as _EmptyResult
from moto.stepfunctions.responses import StepFunctionResponse


def _send_task_failure(self):
    self.stepfunction_backend.send_task_failure(
        self._get_param("taskToken"),
        error=self._get_param("error"),
        cause=self._get_param("cause"),
    )
    return _EmptyResult()


StepFunctionResponse.send_task_failure = _send_task_failure


# ---- Lambda Runtime API, for real function processes ------------------------

_QUEUES: dict = {}
_PENDING: dict = {}
_QUEUES_LOCK = threading.Lock()
INVOKE_TIMEOUT_SECONDS = 300


def _queue(name):
    with _QUEUES_LOCK:
        return _QUEUES.setdefault(name, queue.Queue())


class _RuntimeApi(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, *args):  # quiet
        pass

    def _reply(self, status, body=b"", headers=None):
        self.send_response(status)
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def do_GET(self):
        # /NAME/2018-06-01/runtime/invocation/next
        parts = self.path.strip("/").split("/")
        if len(parts) == 5 and parts[1:] == ["2018-06-01", "runtime", "invocation", "next"]:
            request_id, body = _queue(parts[0]).get()
            self._reply(200, body, {
                "Lambda-Runtime-Aws-Request-Id": request_id,
                "Lambda-Runtime-Deadline-Ms": "99999999999999",
                "Lambda-Runtime-Invoked-Function-Arn": f"arn:aws:lambda:us-east-1:123456789012:function:{parts[0]}",
                "Content-Type": "application/json",
            })
        else:
            self._reply(404)

    def do_POST(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        parts = self.path.strip("/").split("/")
        # /NAME/2018-06-01/runtime/invocation/ID/(response|error)
        if len(parts) == 6 and parts[4] in _PENDING and parts[5] in ("response", "error"):
            slot = _PENDING.pop(parts[4])
            slot["body"], slot["error"] = body, parts[5] == "error"
            slot["done"].set()
            self._reply(202)
        elif len(parts) >= 4 and parts[-2:] == ["init", "error"]:
            sys.stderr.write(f"lambda {parts[0]} failed to start: {body.decode(errors='replace')}\n")
            self._reply(202)
        else:
            self._reply(404)


def _forwarding_invoke(self, function_name, qualifier, body, headers, response_headers):
    name = function_name.split(":function:")[-1].split(":")[0]
    request_id = str(uuid.uuid4())
    slot = {"done": threading.Event()}
    _PENDING[request_id] = slot
    payload = body if isinstance(body, bytes) else (body or "{}").encode()
    _queue(name).put((request_id, payload))
    if not slot["done"].wait(INVOKE_TIMEOUT_SECONDS):
        _PENDING.pop(request_id, None)
        response_headers["x-amz-function-error"] = "Unhandled"
        return json.dumps({"errorType": "Sandbox.Timedout", "errorMessage": f"{name} did not answer"}).encode()
    if slot["error"]:
        response_headers["x-amz-function-error"] = "Unhandled"
    return slot["body"]


def _start_runtime_api(port):
    from moto.awslambda_simple.models import LambdaSimpleBackend

    LambdaSimpleBackend.invoke = _forwarding_invoke
    server = ThreadingHTTPServer(("127.0.0.1", port), _RuntimeApi)
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, daemon=True).start()


if os.environ.get("STACKSYNC_LAMBDA_RUNTIME_PORT"):
    _start_runtime_api(int(os.environ["STACKSYNC_LAMBDA_RUNTIME_PORT"]))

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
