"""Secret redaction of a 1 MB tool result with 10 secrets, beside JSON-encoding it.

- json.dumps:      encoding the result (rows of a query: ids, names, floats, notes),
                   which every structured tool result costs anyway.
- redact (none):   the redaction a tool result gets when it holds no secret (the common
                   case): normalise the JSON text once, look for every form of every secret.
- redact (2 hits): the same text with two secrets in it (one raw, one letter-spaced).
- redact (formats): the same text with a GitHub token and an AWS access key id in it,
                   no named secret (found by their format).
- redact (no formats): "redact (none)" with the credential formats off: what they add.
- stdout text:     1 MB of printed lines (what run_code returns), no secret.
- paths text:      1 MB of printed lines dense with long tokens (paths, ids), no secret:
                   the formats' slow path, where every format is looked for.
- to_text (plain):  end to end, value to redacted JSON text, as a tool result is sent
                   (``redacted_json``): json.dumps, then the text redacted in one pass.
- to_text (escaped): the same for a result whose JSON has escapes (newlines in strings):
                   the JSON text is looked at with its escapes undone, no walk.
- json.dumps (escaped): what encoding that result costs alone.
- scrub walk:      the value walked string by string (``scrub``): what a result whose
                   JSON has escapes and a secret in it costs (to_text falls back to it),
                   and what scrubbing a request costs per string.

Each secret has 10 forms (raw, reversed, base64 at three alignments, hex, URL ...). The
redactor also looks for credentials in well-known formats, as the kernel's does (building
those formats, once per process, is not timed). Medians over repeated runs, in one process.
The goal: every redaction of the --mb result (formats on) within 20 ms, the scrub walk
included; json.dumps is the baseline of each.

    python benchmarks/redaction.py [--mb 1] [--secrets 10] [--repeat 15] [--quick] [--json PATH]
"""

from __future__ import annotations

import argparse
import json
import random
import statistics
import string
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from results import Row, options, write

from agent_kernel.credentials import credential_formats
from agent_kernel.redaction import Redactor, redacted_json, scrub

GOAL_MS = 20


def median_ms(work, repeat: int) -> float:
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        work()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=float, default=1.0)
    parser.add_argument("--secrets", type=int, default=10)
    parser.add_argument("--repeat", type=int, default=15)
    args = options(parser, quick={"mb": 0.1, "repeat": 1})

    rnd = random.Random(7)
    alphabet = string.ascii_letters + string.digits
    secrets = [(f"SECRET_{i}", "sk-" + "".join(rnd.choice(alphabet) for _ in range(29))) for i in range(args.secrets)]
    redactor = Redactor(secrets, formats=credential_formats())
    names_only = Redactor(secrets)
    rows, size = [], 0
    while size < args.mb * 1_000_000:
        row = {
            "id": len(rows),
            "name": "".join(rnd.choice(string.ascii_lowercase) for _ in range(10)),
            "amount": round(rnd.random() * 1000, 2),
            "note": " ".join(rnd.choice(["paid", "late", "refund", "ok", "north", "south"]) for _ in range(6)),
        }
        rows.append(row)
        size += len(json.dumps(row)) + 2
    text = json.dumps(rows, ensure_ascii=False)
    half = len(text) // 2
    with_hits = text[:half] + secrets[3][1] + " " + " ".join(secrets[7][1]) + text[half:]
    with_formats = text[:half] + " ghp_" + "a1B2" * 9 + " AKIA" + "Z7Q2" * 4 + " " + text[half:]
    stdout = "\n".join(
        f"step {i}: loaded {rnd.randint(0, 10**6)} rows from part-{i:05d}.parquet" for i in range(int(20_000 * args.mb))
    )
    paths = "\n".join(
        f"wrote /data/exports/2024/run-{i:06d}/part-{rnd.getrandbits(64):016x}.parquet ({i} rows)"
        for i in range(int(14_000 * args.mb))
    )
    escaped_rows = [dict(r, note=r["note"].replace(" ", "\n")) for r in rows]
    assert "[secret" not in redactor.text(text) and redactor.text(with_hits).count("[secret") == 2
    assert redactor.text(with_formats).count("[secret") == 2
    assert redacted_json(escaped_rows, redactor) == json.dumps(scrub(escaped_rows, redactor), ensure_ascii=False)

    print(f"{len(text) / 1e6:.2f} MB result ({len(rows):,} rows), {len(secrets)} secrets, "
          f"{len(redactor._needles)} forms; medians of {args.repeat} runs")  # fmt: skip
    results = {
        "json.dumps": median_ms(lambda: json.dumps(rows, ensure_ascii=False), args.repeat),
        "redact (none)": median_ms(lambda: redactor.text(text), args.repeat),
        "redact (2 hits)": median_ms(lambda: redactor.text(with_hits), args.repeat),
        "redact (formats)": median_ms(lambda: redactor.text(with_formats), args.repeat),
        "redact (no formats)": median_ms(lambda: names_only.text(text), args.repeat),
        f"stdout text ({len(stdout) / 1e6:.2f} MB)": median_ms(lambda: redactor.text(stdout), args.repeat),
        f"paths text ({len(paths) / 1e6:.2f} MB)": median_ms(lambda: redactor.text(paths), args.repeat),
        "to_text (plain)": median_ms(lambda: redacted_json(rows, redactor), args.repeat),
        "to_text (escaped)": median_ms(lambda: redacted_json(escaped_rows, redactor), args.repeat),
        "json.dumps (escaped)": median_ms(lambda: json.dumps(escaped_rows, ensure_ascii=False), args.repeat),
        "scrub walk": median_ms(lambda: scrub(escaped_rows, redactor), max(3, args.repeat // 3)),
    }
    base = results.pop("json.dumps")
    print(f"  {'json.dumps':<24} {base:8.1f} ms   (the baseline)")
    figures = []
    for label, ms in results.items():
        goal = None if label == "redact (no formats)" else GOAL_MS
        print(f"  {label:<24} {ms:8.1f} ms" + (f"   (goal <= {goal} ms)" if goal else ""))
        figures.append(
            Row(f"{label}, {len(secrets)} secrets (baseline: json.dumps of the result)", ms, "ms", base, goal=goal)
        )
    write(args, "redaction", figures)


if __name__ == "__main__":
    main()
