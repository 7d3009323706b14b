"""Time to first token at one connection: the median time from sending a request to its first SSE event.

    python bench/ttft.py PORT MODEL [N]

One keep-alive connection, N requests one after another (default 2,000, after 200 not counted),
written and read on a raw socket so the client adds as little as it can. Prints the median time
to the first `data:` event and to the end of the stream, in ms. The same client against the floor
and the gateway gives the time the gateway adds (bench/table.sh takes both).
"""

from __future__ import annotations

import socket
import statistics
import sys
import time

WARMUP = 200


def request(port: int, model: str) -> bytes:
    body = (
        b'{"model":"' + model.encode() + b'","messages":[{"role":"system","content":"You are terse."},'
        b'{"role":"user","content":"Say hello in one short sentence."}],"stream":true}'
    )
    head = (
        f"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAuthorization: Bearer sk-bench\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


def one(sock: socket.socket, data: bytes) -> tuple[float, float]:
    """(seconds to the first event, seconds to the end of the chunked answer)."""
    started = time.perf_counter()
    sock.sendall(data)
    seen = b""
    first = 0.0
    while True:
        got = sock.recv(65536)
        if not got:
            raise SystemExit("connection closed")
        seen += got
        if not first and b"data:" in seen:
            first = time.perf_counter() - started
        if seen.endswith(b"0\r\n\r\n") and b"[DONE]" in seen:
            return first, time.perf_counter() - started
        if b" 200 OK" not in seen[:20] and b"\r\n\r\n" in seen:
            raise SystemExit(f"not a 200: {seen[:300]!r}")


def main(port: int, model: str, count: int) -> None:
    data = request(port, model)
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        for _ in range(WARMUP):
            one(sock, data)
        firsts, wholes = zip(*(one(sock, data) for _ in range(count)), strict=True)
    print(f"ttft_p50_ms={statistics.median(firsts) * 1000:.3f} whole_p50_ms={statistics.median(wholes) * 1000:.3f}")


if __name__ == "__main__":
    main(int(sys.argv[1]), sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 2000)
