"""Python bytecodes executed per request, by function: a deterministic, load-independent profile.

    python bench/opcodes.py serve OUT.json floor|gateway ARGS...   (driven by bench/opcodes.sh)
    python bench/opcodes.py show RUN.json [BASE.json] [--top N]

`serve` runs the floor or the gateway with opcode counting switched on by SIGUSR1 and off (the
counts written to OUT.json with the request count from SIGUSR2's file) by SIGUSR2. `show` prints
the opcodes per request and the functions that execute most, or, given BASE, what changed.
Instructions (bench/instructions.sh) are the figure the guard keeps; opcodes say where they go,
cost no valgrind, and do not change with the machine's load.
"""

from __future__ import annotations

import argparse
import collections
import json
import signal
import sys
import threading
from types import CodeType, FrameType
from typing import Any

counts: collections.Counter[CodeType] = collections.Counter()


def _local(frame: FrameType, event: str, arg: Any) -> Any:
    if event == "opcode":
        counts[frame.f_code] += 1
    return _local


def _tracer(frame: FrameType, event: str, arg: Any) -> Any:
    frame.f_trace_opcodes = True
    return _local


def _name(code: CodeType) -> str:
    path = code.co_filename.split("site-packages/")[-1]
    if "/lib/python3" in path:  # the standard library: logging/__init__.py
        path = path.split("/lib/python3")[-1].partition("/")[2]
    return f"{path}:{code.co_firstlineno}:{code.co_name}"


def serve(out: str, kind: str, argv: list[str]) -> None:
    def start(*_: Any) -> None:
        counts.clear()
        sys.settrace(_tracer)
        threading.settrace(_tracer)

    def stop(*_: Any) -> None:
        sys.settrace(None)
        threading.settrace(None)
        with open(out + ".requests") as file:
            requests = int(file.read())
        functions: collections.Counter[str] = collections.Counter()
        for code, n in counts.items():  # code objects may share a name (dataclasses' __init__): add them up
            functions[_name(code)] += n
        with open(out, "w") as file:
            json.dump({"requests": requests, "functions": functions}, file)

    signal.signal(signal.SIGUSR1, start)
    signal.signal(signal.SIGUSR2, stop)
    if kind == "floor":
        sys.argv = ["floor_aiohttp.py", *argv]
        with open(argv[0]) as file:
            source = file.read()
        sys.argv = ["floor_aiohttp.py", *argv[1:]]
        exec(compile(source, "floor_aiohttp.py", "exec"), {"__name__": "__main__"})
    else:
        from gateway.cli.main import main

        sys.exit(main(argv))


def per_request(path: str) -> dict[str, float]:
    with open(path) as file:
        run = json.load(file)
    return {name: n / run["requests"] for name, n in run["functions"].items()}


def show(path: str, base: str | None, top: int) -> None:
    now = per_request(path)
    print(f"{path}: {sum(now.values()):,.0f} opcodes per request")
    if base is None:
        for name, n in sorted(now.items(), key=lambda item: -item[1])[:top]:
            print(f"{n:9.1f}  {name}")
        return
    before = per_request(base)
    print(f"{base}: {sum(before.values()):,.0f} opcodes per request")
    changes = {name: now.get(name, 0) - before.get(name, 0) for name in {*now, *before}}
    for name, n in sorted(changes.items(), key=lambda item: -abs(item[1]))[:top]:
        if n:
            print(f"{n:+9.1f}  {name}")


if __name__ == "__main__":
    if sys.argv[1] == "serve":
        serve(sys.argv[2], sys.argv[3], sys.argv[4:])
    else:
        parser = argparse.ArgumentParser(prog="opcodes.py show")
        parser.add_argument("run")
        parser.add_argument("base", nargs="?")
        parser.add_argument("--top", type=int, default=40)
        args = parser.parse_args(sys.argv[2:])
        show(args.run, args.base, args.top)
