"""Send N chat requests (C at a time) to URL: the fixed load for bench/instructions.sh.

    python bench/send.py URL N C [memory | window] [stream | long]
With `memory`, each of C conversations (`bench-0` ..) gets a memoryId and a token_window of ~20
messages; with `window`, a message_window of 20 (maxMessages: 20).
With `stream`, the requests ask the `mock-stream` route for a stream (2 chunks) and read it to
`[DONE]`; with `long`, the `mock-stream-long` route (32 chunks).
"""

import asyncio
import sys

import aiohttp


def body(model: str, *, stream: bool) -> bytes:
    return (
        b'{"model":"' + model.encode() + b'","messages":[{"role":"system","content":"You are terse."},'
        b'{"role":"user","content":"Say hello in one short sentence."}]' + (b',"stream":true' if stream else b"") + b"}"
    )


def check_stream(answer: bytes) -> None:
    """A stream the client did not ask usage for must end in [DONE] and carry no usage at all."""
    if not answer.endswith(b"data: [DONE]\n\n"):
        raise SystemExit(f"stream cut short: {answer[-200:]!r}")
    if b'"usage"' in answer:
        raise SystemExit(f"usage relayed to a client that did not ask for it: {answer!r}")


WINDOWS = {
    None: {},
    "memory": {"memoryType": "token_window", "maxTokens": "330"},
    "window": {"memoryType": "message_window", "maxMessages": "20"},
}


async def main(url: str, total: int, concurrency: int, *, memory: str | None, stream: str | None) -> None:
    headers = {"Authorization": "Bearer sk-bench", "Content-Type": "application/json"}
    models = {None: "mock-1", "stream": "mock-stream", "long": "mock-stream-long"}
    data = body(models[stream], stream=stream is not None)
    async with aiohttp.ClientSession() as session:

        async def worker(index: int, count: int) -> None:
            extra = {"memoryId": f"bench-{index}", **WINDOWS[memory]} if memory else {}
            for _ in range(count):
                async with session.post(url, data=data, headers={**headers, **extra}) as response:
                    answer = await response.read()
                    if response.status != 200:
                        raise SystemExit(f"status {response.status}: {answer[:500]!r}")
                    if stream:
                        check_stream(answer)

        share = total // concurrency
        await asyncio.gather(*(worker(i, share) for i in range(concurrency)))


if __name__ == "__main__":
    flags = sys.argv[4:]
    stream = "long" if "long" in flags else "stream" if "stream" in flags else None
    memory = "window" if "window" in flags else "memory" if "memory" in flags else None
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), memory=memory, stream=stream))
