"""Convert the real Jetson TX2 Xception grid (../shared/data/tx2-xception/, FlexiBO, MIT) to
jetfleet's profile CSV schema, one file per input size, workload `xception_<size>`:

    python bench/convert_tx2.py [SRC_DIR] [OUT_DIR]
    jetfleet profiles import OUT_DIR/tx2-xception_200x200.csv

Columns: cores = online core flags counted, core_freq kHz -> MHz, gpu_freq / emc_freq Hz -> MHz,
inference_time s -> minibatch_time_ms (one image per "minibatch"), power_consumption read as mW -> W.
"""

from __future__ import annotations

import csv
import sys
from pathlib import Path

from jetfleet.controller.profiles_csv import REQUIRED

DEFAULT_SRC = Path(__file__).resolve().parents[2] / "shared" / "data" / "tx2-xception"
HEADER = REQUIRED  # jetfleet's profile CSV schema (required columns)


def convert_file(src: Path, out_dir: Path) -> Path:
    size = src.stem.rsplit("_", 1)[-1]
    out = out_dir / f"tx2-xception_{size}.csv"
    with src.open() as f, out.open("w", newline="") as g:
        w = csv.writer(g, lineterminator="\n")
        w.writerow(HEADER)
        for row in csv.DictReader(f):
            cores = sum(int(row[f"core{i}_status"]) for i in range(4))
            w.writerow(["tx2", f"xception_{size}", cores, f"{int(row['core_freq']) / 1000:g}",
                        f"{int(row['gpu_freq']) / 1e6:g}", f"{int(row['emc_freq']) / 1e6:g}",
                        f"{float(row['inference_time']) * 1000:.6g}", f"{float(row['power_consumption']) / 1000:.6g}"])
    return out


def convert(src_dir: Path, out_dir: Path) -> list[Path]:
    files = sorted(src_dir.glob("tx2_sampled_output_xception_*.csv"))
    if not files:
        raise SystemExit(f"no TX2 files in {src_dir} (is ../shared beside the checkout?)")
    out_dir.mkdir(parents=True, exist_ok=True)
    return [convert_file(f, out_dir) for f in files]


if __name__ == "__main__":
    src = Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_SRC
    out = Path(sys.argv[2]) if len(sys.argv) > 2 else Path("tx2-profiles")
    for p in convert(src, out):
        print(p)
