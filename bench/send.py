"""Send N chat requests (C at a time) to URL: the fixed load for bench/instructions.sh.

    python bench/send.py URL N C [memory]
With `memory`, each of C conversations gets a memoryId and a token_window of ~20 messages.
"""

import asyncio
import sys

import aiohttp

BODY = (
    b'{"model":"mock-1","messages":[{"role":"system","content":"You are terse."},'
    b'{"role":"user","content":"Say hello in one short sentence."}]}'
)


async def main(url: str, total: int, concurrency: int, memory: bool) -> None:
    headers = {"Authorization": "Bearer sk-bench", "Content-Type": "application/json"}
    async with aiohttp.ClientSession() as session:

        async def worker(index: int, count: int) -> None:
            extra = {"memoryId": f"bench-{index}", "memoryType": "token_window", "maxTokens": "330"} if memory else {}
            for _ in range(count):
                async with session.post(url, data=BODY, headers={**headers, **extra}) as response:
                    await response.read()
                    if response.status != 200:
                        raise SystemExit(f"status {response.status}")

        share = total // concurrency
        await asyncio.gather(*(worker(i, share) for i in range(concurrency)))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), "memory" in sys.argv[4:]))
