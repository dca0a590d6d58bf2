"""moto server, with DynamoDB's write atomicity restored.

moto applies a TransactWriteItems by deep-copying the table, checking and
writing item by item, and restoring the copy on failure -- with no lock. Two
concurrent transactions can then both pass a condition that DynamoDB would let
only one pass (seen here: two writers conditioned on the same specVersion both
"won"). DynamoDB serializes conditional writes on an item; this launcher gives
moto the same guarantee by running its DynamoDB write operations one at a time.
Everything else is moto as released (requirements-dev.txt pins the version).

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
