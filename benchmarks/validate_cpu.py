"""`hsisim validate --device cpu` on the validation scenarios, repeated (run on purpose, not in CI).

    python benchmarks/validate_cpu.py [REPEATS] [CONFIG-NAME-SUBSTRING]

Prints every run's measured and predicted step time and data-wait fraction with the errors, and the
median absolute error per configuration. The machine is shared: single runs move by several %.
"""

from __future__ import annotations

import statistics
import sys
from pathlib import Path

from hsisim.calibration.validate import validate

ROOT = Path(__file__).resolve().parent.parent
CONFIGS = [("compute-bound", "cpu_compute_bound", 1), ("in between", "cpu_in_between", 1),
           ("data-bound", "cpu_data_bound", 1), ("2 processes, gloo", "cpu_gloo_2proc", 2)]


def main() -> None:
    repeats = int(sys.argv[1]) if len(sys.argv) > 1 else 3
    print("| config | run | step measured | step predicted | error | data-wait measured | predicted | error "
          "(points) | all-reduce in a step: error | wait for the slower rank: measured / predicted | "
          "the gradients' all-reduce in the probe: error |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
    summary = []
    only = sys.argv[2] if len(sys.argv) > 2 else ""
    for label, name, world in CONFIGS:
        if only not in name:
            continue
        errs: dict[str, list[float]] = {"step": [], "wait": [], "ar": [], "probe": []}
        for i in range(repeats):
            r = validate(ROOT / "scenarios" / "validate" / f"{name}.yaml", sets=[], device="cpu", world_size=world)
            m, p, e = r["measured"], r["predicted"], r["error_pct"]
            ar = f"{e['allreduce_s']:+.1f} %" if "allreduce_s" in e else "-"
            bw = (f"{m['barrier_wait_s'] * 1e3:.2f} / {p['barrier_wait_s'] * 1e3:.2f} ms" if "barrier_wait_s" in e
                  else "-")
            alone = f"{e['allreduce_probe_s']:+.1f} %" if "allreduce_probe_s" in e else "-"
            print(f"| {label} | {i + 1} | {m['step_time_s'] * 1e3:.2f} ms | {p['step_time_s'] * 1e3:.2f} ms | "
                  f"{e['step_time_s']:+.1f} % | {m['data_wait_fraction']:.1%} | {p['data_wait_fraction']:.1%} | "
                  f"{e['data_wait_fraction']:+.1f} % ({r['error_points']['data_wait_fraction']:+.1f}) | {ar} | {bw} | "
                  f"{alone} |",
                  flush=True)
            errs["step"].append(abs(e["step_time_s"]))
            errs["wait"].append(abs(e["data_wait_fraction"]))
            if "allreduce_s" in e:
                errs["ar"].append(abs(e["allreduce_s"]))
                errs["probe"].append(abs(e["allreduce_probe_s"]))
        summary.append((label, {k: statistics.median(v) for k, v in errs.items() if v}))
    print("\nmedian |error| per configuration:")
    for label, med in summary:
        print(f"  {label}: " + ", ".join(f"{k} {v:.1f} %" for k, v in med.items()))


if __name__ == "__main__":
    main()
