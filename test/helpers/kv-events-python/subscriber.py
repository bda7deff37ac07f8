"""A KV-event subscriber on real libzmq (python3-zmq) and msgpack
(python3-msgpack), written without llmgw's code, for the interop tests:
what a vLLM consumer (vLLM's examples/online_serving/kv_events_subscriber.py)
does, with a DEALER for the replay request.

Usage: subscriber.py PUB_ENDPOINT REPLAY_ENDPOINT TOPIC OTHER_TOPIC LIVE_COUNT
Connects a SUB to TOPIC (with libzmq heartbeats on, so an endpoint that did
not answer PINGs would be dropped) and a second SUB to OTHER_TOPIC, prints
{"event": "connected"}, collects LIVE_COUNT messages, idles a second, asks
the replay socket for everything from sequence 0, and prints one JSON line
per message and a summary. Integers outside JavaScript's safe range and
bytes are printed as strings ("int:…", "hex:…").
"""
import json
import sys
import time

import msgpack
import zmq
from zmq.utils.monitor import recv_monitor_message

pub_endpoint, replay_endpoint, topic, other_topic, live_count = sys.argv[1:6]
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


def emit(**fields):
    print(json.dumps(fields), flush=True)


ctx = zmq.Context.instance()
sub = ctx.socket(zmq.SUB)
sub.setsockopt(zmq.HEARTBEAT_IVL, 100)
sub.setsockopt(zmq.HEARTBEAT_TIMEOUT, 400)
monitor = sub.get_monitor_socket(zmq.EVENT_DISCONNECTED)
sub.setsockopt_string(zmq.SUBSCRIBE, topic)
sub.connect(pub_endpoint)
other = ctx.socket(zmq.SUB)
other.setsockopt_string(zmq.SUBSCRIBE, other_topic)
other.connect(pub_endpoint)
emit(event="connected")

sub.RCVTIMEO = 20_000
for _ in range(int(live_count)):
    frames = sub.recv_multipart()
    emit(event="live", frames=len(frames), topic=frames[0].decode(), seq_hex=frames[1].hex(),
         seq=int.from_bytes(frames[1], "big"), batch=jsonable(msgpack.unpackb(frames[-1], raw=False)),
         ts_is_float=isinstance(msgpack.unpackb(frames[-1], raw=False)[0], float))

# Idle for several heartbeat timeouts: libzmq drops a peer that does not PONG.
time.sleep(1.2)

dealer = ctx.socket(zmq.DEALER)
dealer.RCVTIMEO = 10_000
dealer.connect(replay_endpoint)
dealer.send_multipart([b"", (0).to_bytes(8, "big")])
while True:
    frames = dealer.recv_multipart()
    if frames[-2] == b"\xff" * 8:
        emit(event="end", frames=[f.hex() for f in frames])
        break
    emit(event="replay", frames=len(frames), seq=int.from_bytes(frames[-2], "big"), batch=jsonable(msgpack.unpackb(frames[-1], raw=False)))

other_count = 0
while other.poll(300):
    other.recv_multipart()
    other_count += 1
disconnects = 0
while monitor.poll(0):
    recv_monitor_message(monitor)
    disconnects += 1
emit(event="done", other_topic_messages=other_count, disconnects=disconnects)
