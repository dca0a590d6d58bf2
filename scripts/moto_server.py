"""moto server, with DynamoDB's write atomicity restored.

moto applies a TransactWriteItems by deep-copying the table, checking and
writing item by item, and restoring the copy on failure -- with no lock. Two
concurrent transactions can then both pass a condition that DynamoDB would let
only one pass (seen here: two writers conditioned on the same specVersion both
"won"). DynamoDB serializes conditional writes on an item; this launcher gives
moto the same guarantee by running its DynamoDB write operations one at a time.
Everything else is moto as released (requirements-dev.txt pins the version).

Usage: python moto_server.py -H 127.0.0.1 -p PORT   (the moto_server arguments)
"""
import functools
import sys
import threading

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

if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
