"""Sends one message with the real C++ client (PyPI rocketmq 0.4.4, librocketmq.so), in its own process.

usage: python cpp_send.py NAMESRV_ADDR TOPIC
Prints one JSON line: {"status": "OK", "msg_id": ..., "offset": ...} or {"error": TYPE, "message": ...}.
The C++ client writes its logs under $HOME/logs; run it with a scratch HOME.
"""

from __future__ import annotations

import json
import sys


def main() -> None:
    from rocketmq.client import Message, Producer

    namesrv, topic = sys.argv[1], sys.argv[2]
    producer = Producer("nsreplay-real-client-test", timeout=5000)
    producer.set_namesrv_addr(namesrv)
    producer.start()
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
