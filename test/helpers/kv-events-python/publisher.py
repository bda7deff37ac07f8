"""A vLLM-shaped KV-event publisher on real libzmq (python3-zmq) and msgpack
(python3-msgpack), written without llmgw's code, for the interop tests.

It does what vllm/distributed/kv_events.py's ZmqEventPublisher does: PUB
frames [topic, seq (8 bytes big-endian), payload], sequences from 0, a
buffer of past payloads, and a ROUTER replay socket answering
[identity, "", start_seq] with the buffered batches and an end marker of -1.
The batch is msgpack as msgspec writes vLLM's KVEventBatch.

Usage: publisher.py PUB_PORT REPLAY_PORT TOPIC LAYOUT REPLAY_FORM HASHES PRELOAD
  PORT 0 picks a free one; a PUB_PORT of "connect:tcp://HOST:PORT" connects
  the PUB to a bound SUB there instead, as vLLM does for an endpoint that
  names a host (and prints "pub": 0); LAYOUT "map" (current vLLM) or "array" (0.9);
  REPLAY_FORM "topic" (current vLLM) or "plain" (earlier); HASHES "int" or
  "bytes"; PRELOAD batches are buffered before the sockets bind, as if
  published before any subscriber could connect.
Prints {"pub": port, "replay": port}, then reads one command per line on stdin:
  publish N      publish N batches
  lose N         buffer N batches without sending them (a PUB drop)
  quit
and answers each with {"next_seq": n}.
"""
import hashlib
import json
import sys
import threading
import time
from collections import deque

import msgpack
import zmq

END_SEQ = (-1).to_bytes(8, "big", signed=True)
pub_port, replay_port, topic, layout, replay_form, hashes, preload = sys.argv[1:8]
topic_bytes = topic.encode()


def block_hash(k):
    if hashes == "int":
        # Above 2^63, as vLLM's 64-bit hashes often are.
        return 2**63 + k * 7919
    return hashlib.sha256(str(k).encode()).digest()


def event_batch(k):
    stored = {
        "block_hashes": [block_hash(k)],
        "parent_block_hash": block_hash(k - 1) if k > 0 else None,
        "token_ids": list(range(k * 16, k * 16 + 16)),
        "block_size": 16,
        "lora_id": None,
        "medium": "GPU",
        "lora_name": None,
    }
    events = []
    if layout == "map":
        events.append({"type": "BlockStored", **stored, "group_idx": 0, "kv_cache_spec_kind": "full_attention"})
        if k % 4 == 3:
            events.append({"type": "BlockRemoved", "block_hashes": [block_hash(k - 3)], "medium": "GPU", "group_idx": 0})
    else:
        # vLLM 0.9's BlockStored had no medium or lora_name yet.
        events.append(["BlockStored", *list(stored.values())[:5]])
        if k % 4 == 3:
            events.append(["BlockRemoved", [block_hash(k - 3)]])
    return msgpack.packb([time.time(), events, 0], use_bin_type=True)


buffer = deque(maxlen=10_000)
lock = threading.Lock()
next_seq = 0
for _ in range(int(preload)):
    buffer.append((next_seq, event_batch(next_seq)))
    next_seq += 1

ctx = zmq.Context.instance()
pub = ctx.socket(zmq.PUB)
pub.setsockopt(zmq.SNDHWM, 100_000)
router = ctx.socket(zmq.ROUTER)
if pub_port.startswith("connect:"):
    pub.connect(pub_port[len("connect:"):])
    pub_port = "0"
elif pub_port == "0":
    pub_port = pub.bind_to_random_port("tcp://127.0.0.1")
else:
    pub.bind(f"tcp://127.0.0.1:{pub_port}")
if replay_port == "0":
    replay_port = router.bind_to_random_port("tcp://127.0.0.1")
else:
    router.bind(f"tcp://127.0.0.1:{replay_port}")



def serve_replay():
    while True:
        frames = router.recv_multipart()
        if len(frames) != 3:
            continue
        client_id, _, start = frames
        start_seq = int.from_bytes(start, "big")
        with lock:
            batches = [(s, p) for s, p in buffer if s >= start_seq]
        for s, p in batches:
            body = [topic_bytes, s.to_bytes(8, "big"), p] if replay_form == "topic" else [s.to_bytes(8, "big"), p]
            router.send_multipart([client_id, b"", *body])
        router.send_multipart([client_id, b"", b"", END_SEQ, b""] if replay_form == "topic" else [client_id, b"", END_SEQ, b""])


threading.Thread(target=serve_replay, daemon=True).start()
print(json.dumps({"pub": int(pub_port), "replay": int(replay_port)}), flush=True)

for line in sys.stdin:
    op, _, arg = line.strip().partition(" ")
    if op == "quit":
        break
    for _ in range(int(arg or "1")):
        payload = event_batch(next_seq)
        if op == "publish":
            pub.send_multipart([topic_bytes, next_seq.to_bytes(8, "big"), payload])
        with lock:
            buffer.append((next_seq, payload))
        next_seq += 1
    print(json.dumps({"next_seq": next_seq}), flush=True)
