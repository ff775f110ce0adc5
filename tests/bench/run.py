"""`make bench`: runs every tests/bench/bench_*.py (each has run() -> dict) and writes results/bench/NAME.json.

Benchmarks hold the performance goals; tests never time things.
"""
import importlib.util
import json
import sys
from pathlib import Path

OUT = Path("results/bench")


def main() -> int:
    OUT.mkdir(parents=True, exist_ok=True)
    only = set(sys.argv[1:])
    for file in sorted(Path(__file__).parent.glob("bench_*.py")):
        name = file.stem.removeprefix("bench_")
        if only and name not in only:
            continue
        spec = importlib.util.spec_from_file_location(file.stem, file)
        mod = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(mod)
        result = mod.run()
        path = OUT / f"{name}.json"
        path.write_text(json.dumps(result, indent=2) + "\n")
        print(f"{name}: {path}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
