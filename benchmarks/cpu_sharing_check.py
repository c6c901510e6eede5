"""hsisim's prediction against a user's own training loop that imports nothing from hsisim (run on purpose).

    python benchmarks/cpu_sharing_check.py [ROUNDS] [CONFIG ...]

For each configuration of ``benchmarks/user_loop/hamida_user.py`` (the script a user wrote, run as
a plain ``python`` process with PyTorch's defaults), each round does, one after the other, so that
a noisy machine weighs on both: the script's own training loop, ``hsisim calibrate`` on the
script's factories and ``hsisim run`` on a scenario naming them (``instance: local-cpu``), and the
script's loop again. The prediction is compared with the mean of the two loops around it (a
machine that drifts during the round weighs on both sides alike); the two loops' difference is
printed too, as the real run's own spread in that round. It prints every round.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent / "user_loop"
SCRIPT = HERE / "hamida_user.py"
STEPS = 150
SCENARIO = """
name: user_{config}
dataset: {{factory: "hamida_user.py:make_dataset", kwargs: {{patch: {patch}, preprocess: {preprocess}}}}}
model: {{factory: "hamida_user.py:make_model", kwargs: {{patch: {patch}}}, precision: fp32, optimizer: adam}}
training: {{steps: {steps}, global_batch: {batch}, micro_batch: {batch}}}
loader: {{num_workers: {workers}, prefetch_factor: 2, persistent_workers: false}}
cluster: {{instance: local-cpu, nodes: 1, market: on_demand}}
calibration: {profile}
checkpoint: {{policy: none}}
simulation: {{replicas: 20, seed: 1}}
"""


def _configs() -> dict[str, dict[str, object]]:
    sys.path.insert(0, str(HERE))
    from hamida_user import CONFIGS  # the user's script: plain PyTorch

    return CONFIGS


def _hsisim(*args: str, cwd: Path) -> dict[str, object]:
    out = subprocess.run([sys.executable, "-m", "hsisim", *args], cwd=cwd, capture_output=True, text=True, check=True)
    return json.loads(out.stdout)


def predict(config: str, cfg: dict[str, object], work: Path) -> dict[str, float]:
    """The user's view: calibrate on the script's factories, then run a scenario that names them."""
    profile = work / f"{config}.json"
    kwargs = json.dumps({"dataset": {"patch": cfg["patch"], "preprocess": cfg["preprocess"]},
                         "model": {"patch": cfg["patch"]}})
    _hsisim("calibrate", "--device", "cpu", "--quick", "--model-factory", "hamida_user.py:make_model",
            "--dataset-factory", "hamida_user.py:make_dataset", "--factory-kwargs", kwargs, "--batch",
            str(cfg["batch"]), "--out", str(profile), "--json", cwd=work)
    scen = work / f"{config}.yaml"
    scen.write_text(SCENARIO.format(config=config, steps=STEPS, profile=profile, **cfg))
    m = _hsisim("run", str(scen), "--json", "--allow-code", "--no-compare", "--no-levers", "--executor", "inline",
                cwd=work)["metrics"]
    busy = sum(m[f"t_{t}_h"]["mean"] for t in ("compute", "data", "comm", "stall")) * 3600  # type: ignore[index]
    # what calibration's own loop measured (the interference probe, at this batch and worker count)
    it = json.loads(profile.read_text())["data"]["modes"]["factory"]["interference"]
    w = int(cfg["workers"])  # type: ignore[call-overload]
    loop = (it["inline"]["build_s"] + it["inline"]["step_s"], it["inline"]["build_s"]) if w == 0 else \
        (it["workers"][w - 1]["loop_step_s"], it["workers"][w - 1]["loop_wait_s"])
    return {"step_s": busy / STEPS, "wait_share": m["t_data_h"]["mean"] * 3600 / busy,  # type: ignore[index]
            "probe_step_s": loop[0], "probe_wait_share": loop[1] / loop[0]}


def measure(config: str, work: Path) -> dict[str, float]:
    """The script's own loop, as the user runs it."""
    out = subprocess.run([sys.executable, str(SCRIPT), config, str(STEPS)], cwd=work, capture_output=True, text=True,
                         check=True)
    d = json.loads(out.stdout)
    step, wait = d["step_s"], d["wait_s"]
    return {"step_s": statistics.fmean(step), "wait_share": sum(wait) / sum(step), "threads": d["torch_threads"]}


def main() -> None:
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 2
    configs = _configs()
    names = sys.argv[2:] or list(configs)
    print("| config | round | step measured (before, after) | step predicted | error | data wait measured (before, "
          "after) | predicted | error (points) | calibration's own loop: step, data wait |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|---:|")
    pooled: dict[str, list[dict[str, float]]] = {}
    with tempfile.TemporaryDirectory() as d:
        work = Path(d)
        (work / "hamida_user.py").write_text(SCRIPT.read_text())
        for name in names:
            for r in range(rounds):
                before = measure(name, work)
                p = predict(name, configs[name], work)
                after = measure(name, work)
                m = {k: (before[k] + after[k]) / 2 for k in ("step_s", "wait_share")}
                spread = 100 * (after["step_s"] / before["step_s"] - 1)
                err = 100 * (p["step_s"] / m["step_s"] - 1)
                pts = 100 * (p["wait_share"] - m["wait_share"])
                print(f"| {name} | {r + 1} | {m['step_s'] * 1e3:.1f} ms ({before['step_s'] * 1e3:.1f}, "
                      f"{after['step_s'] * 1e3:.1f}: {spread:+.1f} %) | {p['step_s'] * 1e3:.1f} ms | {err:+.1f} % | "
                      f"{m['wait_share']:.1%} ({before['wait_share']:.1%}, {after['wait_share']:.1%}) | "
                      f"{p['wait_share']:.1%} | {pts:+.1f} | "
                      f"{p['probe_step_s'] * 1e3:.1f} ms, {p['probe_wait_share']:.1%} |", flush=True)
                pooled.setdefault(name, []).append({**{f"m_{k}": v for k, v in m.items()}, **p})
    print("\npooled over the rounds (mean of the predictions against the mean of the measurements):")
    for name, rows in pooled.items():
        mean = {k: statistics.fmean(r[k] for r in rows) for k in ("m_step_s", "step_s", "m_wait_share", "wait_share")}
        print(f"  {name}: step {100 * (mean['step_s'] / mean['m_step_s'] - 1):+.1f} %, data wait "
              f"{100 * (mean['wait_share'] - mean['m_wait_share']):+.1f} points")


if __name__ == "__main__":
    main()
