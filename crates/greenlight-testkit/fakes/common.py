"""Shared plumbing for the fake agent CLIs: the invocation log and stdin handling.

Driven by environment variables (set by the wrapper greenlight-testkit writes):
  FAKE_AGENT_SCENARIO     which measured behaviour to reproduce (see each fake)
  FAKE_AGENT_LOG          append one JSON line per invocation here
  FAKE_AGENT_ANSWER       the answer text (default: OK)
  FAKE_AGENT_GOOD_MODELS  comma-separated model ids that answer; others fail
  FAKE_AGENT_WRITE        in the `write` scenario, the file (relative to cwd) to write
"""
import json
import os
import select
import signal
import subprocess
import sys
import time


def env(name, default=None):
    return os.environ.get(name, default)


def read_stdin(argv_prompt):
    """Read stdin as the real CLIs do: to end-of-file, so an open stdin blocks."""
    if argv_prompt is not None:
        # claude with a prompt in argv and stdin left open: waits 3 s, warns, proceeds.
        ready, _, _ = select.select([sys.stdin], [], [], 3.0)
        if not ready:
            sys.stderr.write("Warning: no stdin data received in 3s, proceeding without it\n")
            sys.stderr.flush()
            return ""
    data = sys.stdin.buffer.read()
    return data.decode("utf-8", errors="replace")


def spawn_stubborn_grandchild():
    """A grandchild in our process group that ignores SIGTERM: only SIGKILL to the group ends it."""
    code = "import signal,time\nsignal.signal(signal.SIGTERM, signal.SIG_IGN)\nwhile True: time.sleep(1)\n"
    child = subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.DEVNULL,
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return child.pid


def log(argv, stdin, extra_pids=()):
    path = env("FAKE_AGENT_LOG")
    if not path:
        return
    entry = {
        "argv": argv,
        "stdin": stdin,
        "cwd": os.getcwd(),
        "pid": os.getpid(),
        "pgid": os.getpgid(0),
        "env_names": sorted(os.environ.keys()),
        "extra_pids": list(extra_pids),
    }
    with open(path, "a", encoding="utf-8") as f:
        f.write(json.dumps(entry) + "\n")


def model_is_good(model):
    good = env("FAKE_AGENT_GOOD_MODELS")
    if not good:
        return True
    return model in good.split(",")


def write_deliverable(prompt):
    target = env("FAKE_AGENT_WRITE")
    if target:
        os.makedirs(os.path.dirname(os.path.abspath(target)), exist_ok=True)
        with open(target, "w", encoding="utf-8") as f:
            f.write("written by the fake agent at %f\n%s\n" % (time.time(), prompt[:200]))


def ignore_term():
    signal.signal(signal.SIGTERM, signal.SIG_IGN)


def hang():
    while True:
        time.sleep(1)


def emit(line):
    sys.stdout.write(line + "\n")
    sys.stdout.flush()
