"""A SUB that binds, on real libzmq (python3-zmq) and msgpack
(python3-msgpack), written without llmgw's code: what llm-d's KV-cache
indexer does (pkg/kvcache/kvevents/zmq_subscriber.go binds its SUB and
subscribes to "kv@"; vLLM's publishers connect to it).

Usage: bound-subscriber.py TOPIC_FILTER COUNT
Binds to a free port on 127.0.0.1, prints {"port": n}, then one JSON line
per message received ({"topic", "frames", "seq", "pod", "model", "batch"},
the topic split on "@" as llm-d splits it), and {"event": "done"} after
COUNT messages. Integers outside JavaScript's safe range and bytes are
printed as strings ("int:…", "hex:…").
"""
import json
import sys

import msgpack
import zmq

topic_filter, count = sys.argv[1:3]
SAFE = 2**53 - 1


def jsonable(v):
    if isinstance(v, bytes):
        return "hex:" + v.hex()
    if isinstance(v, bool) or v is None or isinstance(v, (float, str)):
        return v
    if isinstance(v, int):
        return v if -SAFE <= v <= SAFE else f"int:{v}"
    if isinstance(v, (list, tuple)):
        return [jsonable(x) for x in v]
    if isinstance(v, dict):
        return {k: jsonable(x) for k, x in v.items()}
    raise TypeError(type(v))


ctx = zmq.Context.instance()
sub = ctx.socket(zmq.SUB)
sub.setsockopt(zmq.HEARTBEAT_IVL, 100)
sub.setsockopt(zmq.HEARTBEAT_TIMEOUT, 400)
sub.setsockopt_string(zmq.SUBSCRIBE, topic_filter)
port = sub.bind_to_random_port("tcp://127.0.0.1")
print(json.dumps({"port": port}), flush=True)

sub.RCVTIMEO = 20_000
for _ in range(int(count)):
    frames = sub.recv_multipart()
    topic = frames[0].decode()
    parts = topic.split("@")
    print(json.dumps({
        "topic": topic,
        "frames": len(frames),
        "seq": int.from_bytes(frames[1], "big"),
        "pod": parts[1] if len(parts) == 3 else None,
        "model": parts[2] if len(parts) == 3 else None,
        "batch": jsonable(msgpack.unpackb(frames[-1], raw=False)),
    }), flush=True)
print(json.dumps({"event": "done"}), flush=True)
