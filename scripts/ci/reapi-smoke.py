"""Waits for a REAPI server to answer, then proves its CAS and ActionCache work end to end.

Usage (with the BuildGrid venv's python, which bundles grpc and the REAPI protos):
    reapi-smoke.py URL [--wait SECONDS] [--pid PID]

URL is http://HOST:PORT (instance name ""). Polls GetCapabilities until it answers, for at most
--wait seconds and only while process PID (the server) lives; then uploads one blob with
BatchUpdateBlobs, reads it back with BatchReadBlobs, and expects NOT_FOUND from GetActionResult
for an action nobody ran. Exit 0 when all of that held, 2 when the server never answered, 1 when
it answered wrongly; each failure prints what was expected and what came back.
"""

import argparse
import hashlib
import os
import sys
import time
import uuid

import grpc
from buildgrid._protos.build.bazel.remote.execution.v2 import (
    remote_execution_pb2 as re,
    remote_execution_pb2_grpc as re_grpc,
)


def fail(code, message):
    print(f"reapi-smoke: {message}", file=sys.stderr)
    sys.exit(code)


def alive(pid):
    try:
        os.kill(pid, 0)
        return True
    except ProcessLookupError:
        return False
    except PermissionError:
        return True


def wait_for_capabilities(target, url, wait, pid):
    deadline = time.monotonic() + wait
    while True:
        # A channel per attempt: one that failed to connect backs off for seconds before it
        # tries again, long after the server is up.
        with grpc.insecure_channel(target) as channel:
            try:
                request = re.GetCapabilitiesRequest(instance_name="")
                return re_grpc.CapabilitiesStub(channel).GetCapabilities(request, timeout=1)
            except grpc.RpcError as error:
                last = f"{error.code().name}: {error.details()}"
        if pid is not None and not alive(pid):
            fail(2, f"the server (pid {pid}) exited before {url} answered GetCapabilities ({last})")
        if time.monotonic() >= deadline:
            fail(2, f"{url} did not answer GetCapabilities within {wait:g} s ({last})")
        time.sleep(0.2)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("url")
    parser.add_argument("--wait", type=float, default=0)
    parser.add_argument("--pid", type=int)
    args = parser.parse_args()
    target = args.url.removeprefix("http://")
    caps = wait_for_capabilities(target, args.url, args.wait, args.pid)
    channel = grpc.insecure_channel(target)
    sha256 = re.DigestFunction.SHA256
    if sha256 not in caps.cache_capabilities.digest_functions:
        fail(1, f"{args.url} does not offer SHA256 digests: {caps.cache_capabilities}")
    if not caps.execution_capabilities.exec_enabled:
        fail(1, f"{args.url} has execution disabled: {caps.execution_capabilities}")

    # A blob no earlier run uploaded, so the round trip is this run's.
    blob = f"greenlight reapi smoke {uuid.uuid4()}\n".encode()
    digest = re.Digest(hash=hashlib.sha256(blob).hexdigest(), size_bytes=len(blob))
    cas = re_grpc.ContentAddressableStorageStub(channel)
    update = cas.BatchUpdateBlobs(
        re.BatchUpdateBlobsRequest(requests=[re.BatchUpdateBlobsRequest.Request(digest=digest, data=blob)]),
        timeout=10,
    )
    if [r.status.code for r in update.responses] != [0]:
        fail(1, f"BatchUpdateBlobs of {digest.hash}/{digest.size_bytes} did not succeed: {update}")
    read = cas.BatchReadBlobs(re.BatchReadBlobsRequest(digests=[digest]), timeout=10)
    if [(r.status.code, r.data) for r in read.responses] != [(0, blob)]:
        fail(1, f"BatchReadBlobs of {digest.hash} did not return the blob just uploaded: {read}")

    # The blob is no Action, and nothing ever ran it: the cache must say NOT_FOUND.
    action_cache = re_grpc.ActionCacheStub(channel)
    try:
        result = action_cache.GetActionResult(re.GetActionResultRequest(action_digest=digest), timeout=10)
        fail(1, f"GetActionResult of an action nobody ran returned a result: {result}")
    except grpc.RpcError as error:
        if error.code() != grpc.StatusCode.NOT_FOUND:
            fail(1, f"GetActionResult of an action nobody ran: expected NOT_FOUND, got {error.code().name}: {error.details()}")

    print(f"reapi-smoke: {args.url} answers GetCapabilities, BatchUpdateBlobs, BatchReadBlobs and GetActionResult (NOT_FOUND)")


if __name__ == "__main__":
    main()
