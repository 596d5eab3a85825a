"""Closed-loop HTTP load for the query API, run as its own process (query_sweep.py).

`--clients` keep-alive connections (asyncio on uvloop, a bare HTTP/1.1 client: the load
generator's own CPU is small, because it shares the two cores with the server and Cassandra)
each send GET /stores/{store}/keys/{key} for random keys, one after another, for `--seconds`
after `--warmup` seconds untimed. A 200 must carry the key's value (`key-000000042` -> 42);
a 503 (shed) must carry Retry-After, and the client then waits that long before its next
request (times 1 to 1.5, at random), as a well-behaved client does: one that retried at once
would only add load, and shed clients that all came back at the same instant would arrive as
one burst. Clients connect over the first half second. Prints one JSON object: counts, latencies in ms of the
answered and of the shed requests, and anything else as errors.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import json
import random
import sys
import time

import uvloop


def key_of(i: int) -> str:
    return f"key-{i:09d}"


class Tally:
    def __init__(self) -> None:
        self.ok: list[float] = []
        self.shed: list[float] = []
        self.errors: list[str] = []
        self.timing = False


async def _one_client(host: str, port: int, store: str, keys: int, seed: int, until: float, tally: Tally) -> None:
    rng = random.Random(seed)
    await asyncio.sleep(rng.uniform(0, 0.5))  # clients arrive over half a second, not at one instant
    reader, writer = await asyncio.open_connection(host, port)
    try:
        while time.monotonic() < until:
            i = rng.randrange(keys)
            request = f"GET /stores/{store}/keys/{key_of(i)} HTTP/1.1\r\nHost: {host}\r\n\r\n".encode()
            started = time.perf_counter()
            writer.write(request)
            head = await reader.readuntil(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            status = int(lines[0].split(" ", 2)[1])
            headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)}
            body = await reader.readexactly(int(headers.get("content-length", "0")))
            took = time.perf_counter() - started
            shed = status == 503 and "retry-after" in headers
            if tally.timing:
                if status == 200 and json.loads(body)["value"] == i:
                    tally.ok.append(took)
                elif shed:
                    tally.shed.append(took)
                else:
                    tally.errors.append(f"{status} {body[:120]!r}")
            if shed:  # a well-behaved client waits as told, with jitter so shed clients do not return as one
                await asyncio.sleep(float(headers["retry-after"]) * rng.uniform(1.0, 1.5))
            if headers.get("connection", "").lower() == "close":
                writer.close()
                reader, writer = await asyncio.open_connection(host, port)
    except (OSError, asyncio.IncompleteReadError) as exc:
        tally.errors.append(f"{type(exc).__name__}: {exc}")
    finally:
        writer.close()


async def run(args: argparse.Namespace) -> dict:
    tally = Tally()
    began = time.monotonic()
    until = began + args.warmup + args.seconds
    clients = [
        _one_client(args.host, args.port, args.store, args.keys, args.seed + n, until, tally)
        for n in range(args.clients)
    ]

    async def start_timing() -> float:
        await asyncio.sleep(args.warmup)
        tally.timing = True
        return time.monotonic()

    timed_from, *_ = await asyncio.gather(start_timing(), *clients)
    wall = time.monotonic() - timed_from
    return {
        "clients": args.clients,
        "seconds": wall,
        "ok": len(tally.ok),
        "shed": len(tally.shed),
        "errors": len(tally.errors),
        "error_samples": tally.errors[:5],
        "ok_ms": [round(x * 1000, 3) for x in tally.ok],
        "shed_ms": [round(x * 1000, 3) for x in tally.shed],
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--store", required=True)
    parser.add_argument("--keys", type=int, required=True)
    parser.add_argument("--clients", type=int, required=True)
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--warmup", type=float, default=2.0)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    gc.disable()  # the client's own collections would show as the server's latency (it makes no cycles)
    json.dump(uvloop.run(run(args)), sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
