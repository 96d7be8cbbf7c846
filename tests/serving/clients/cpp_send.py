"""Sends one message with the real C++ client (PyPI rocketmq 0.4.4, librocketmq.so), in its own process.

usage: python cpp_send.py NAMESRV_ADDR TOPIC
Prints one JSON line: {"status": "OK", "msg_id": ..., "offset": ...} or {"error": TYPE, "message": ...}.
The C++ client writes its logs under $HOME/logs; run it with a scratch HOME.

The send waits for the client's start-up heartbeat. The client (librocketmq 2.x) runs it on a timer 10 ms
after ``start()``, to every broker it knows. A send whose route lookup ends just before that timer finds
the broker's connection being opened by the heartbeat thread: it gives up at once ("GetTransport of:…
get timed_mutex timeout" in the client's log), its retries the same within a millisecond, and it reports
"No route info of this topic". The lookup through the shim takes about 10 ms, so this hit CI runs; a sweep
of delays added to the lookup reproduces it. Waiting is a property of this client, not of the shim.
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

STARTUP_HEARTBEAT_WAIT_S = 60.0


def wait_for_startup_heartbeat() -> bool:
    """True once this process's client log shows the timer's heartbeat (the second "sendheartbeat" line:
    the first is written by ``start()`` itself); False after :data:`STARTUP_HEARTBEAT_WAIT_S`."""
    log = Path(os.environ["HOME"]) / "logs" / "rocketmq-cpp" / f"{os.getpid()}_rocketmq-cpp.log.0"
    deadline = time.monotonic() + STARTUP_HEARTBEAT_WAIT_S
    while time.monotonic() < deadline:
        if log.exists() and log.read_text(errors="replace").count("sendheartbeat") >= 2:
            return True
        time.sleep(0.01)
    return False


def main() -> None:
    from rocketmq.client import Message, Producer

    namesrv, topic = sys.argv[1], sys.argv[2]
    producer = Producer("nsreplay-real-client-test", timeout=5000)
    producer.set_namesrv_addr(namesrv)
    producer.start()
    if not wait_for_startup_heartbeat():
        producer.shutdown()
        print(json.dumps({"error": "HarnessTimeout",
                          "message": f"no start-up heartbeat in the client's log within {STARTUP_HEARTBEAT_WAIT_S} s"}))
        return
    try:
        message = Message(topic)
        message.set_keys("nsreplay")
        message.set_body("hello from nsreplay")
        result = producer.send_sync(message)
        out = {"status": result.status.name, "msg_id": result.msg_id, "offset": result.offset}
    except Exception as exc:  # the test asserts on the failure
        out = {"error": type(exc).__name__, "message": str(exc)}
    finally:
        producer.shutdown()
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
