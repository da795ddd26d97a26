#!/usr/bin/env python3
"""Read threads from a running historyd in every value format, and compare.

    check_formats.py --target HOST:PORT --reads '[["thread", "channel"], ...]' --out result.json

test/clients runs this against the historyd it started on its fixture, in
the client virtualenv. For each thread and channel, every turn from 0 to
one past the total is read with ``turn()`` and the whole thread with
``snapshots()``, with values as JSON text (the default) and as
``google.protobuf.Value``: the answers must be the same objects, ``int``
against ``float``, ``-0.0`` and key order included. Raw values must parse
to the same values.

Writes ``{"reads": [{"thread", "channel", "turns", "entries", "json_bytes"}],
"mismatches": ["..."]}``; exits 0 either way (the caller reports).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from typing import Any

from historyd_client import HistorydThreadHistory
from historyd_client._convert import json_to_python
from test_values import typed


async def check(target: str, reads: list[tuple[str, str]]) -> dict[str, Any]:
    out: dict[str, Any] = {"reads": [], "mismatches": []}
    bad = out["mismatches"]
    async with (
        HistorydThreadHistory(target, plaintext=True) as as_json,
        HistorydThreadHistory(target, plaintext=True, value_format="proto") as as_proto,
        HistorydThreadHistory(target, plaintext=True, value_format="raw") as as_raw,
    ):
        for thread, channel in reads:
            where = f"thread {thread!r} channel {channel!r}"
            whole = await as_json.snapshots(thread, channel=channel)
            if typed(whole) != typed(await as_proto.snapshots(thread, channel=channel)):
                bad.append(f"{where}: snapshots() differ between json and proto")
            entries = json_bytes = 0
            for n in range(0, whole.total + 2):
                got = await as_json.turn(thread, n, channel=channel)
                want = await as_proto.turn(thread, n, channel=channel)
                if typed(got) != typed(want):
                    bad.append(f"{where} turn {n}: json {got!r}\n  proto {want!r}")
                raw = await as_raw.turn(thread, n, channel=channel)
                for key, entry in (raw.state or {}).items():
                    entries += 1
                    json_bytes += len(entry["value_json"])
                    if typed(json_to_python(entry["value_json"])) != typed((got.state or {})[key].get("value")):
                        bad.append(f"{where} turn {n} key {key!r}: raw text {entry['value_json'][:200]!r} parses otherwise")
            out["reads"].append(
                {"thread": thread, "channel": channel, "turns": whole.total, "entries": entries, "json_bytes": json_bytes}
            )
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--target", required=True, help="historyd's address, served in plaintext")
    ap.add_argument("--reads", required=True, help='JSON list of [thread, channel] pairs ("" is the default channel)')
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    reads = [(t, c) for t, c in json.loads(args.reads)]
    result = asyncio.run(check(args.target, reads))
    with open(args.out, "w", encoding="utf-8") as f:
        json.dump(result, f, ensure_ascii=False)
    print(f"check_formats.py: {len(reads)} reads, {len(result['mismatches'])} mismatches", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
