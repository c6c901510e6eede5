"""hsisim's prediction against a user's own training loop that imports nothing from hsisim (run on purpose).

    python benchmarks/cpu_sharing_check.py [ROUNDS] [CONFIG ...] [--user-runs K | --interleave [--lever]]
                                           [--quick | --threaded-loop-s S] [--log FILE]

For each configuration of ``benchmarks/user_loop/hamida_user.py`` (the script a user wrote, run as
a plain ``python`` process with PyTorch's defaults), each round does, one after the other, so that
a noisy machine weighs on both: the script's own training loop K times (default 2), ``hsisim
calibrate`` on the script's factories and ``hsisim run`` on a scenario naming them (``instance:
local-cpu``), and the script's loop K times again. The prediction is compared with the mean of the
2K loops around it (a machine that drifts during the round weighs on both sides alike). Each loop
is a fresh process, and on a shared machine one process's step differs from the next one's: on
the 2-core VM, 12 back-to-back runs of offline5 gave 23.7-31.7 ms (sd 9 % of the mean) while each
run's own 30-step blocks stayed within a few per cent. So a single loop is a poor truth, and the
table gives every loop, their spread, and the 95 % confidence interval of their mean. It prints
every round, then every configuration pooled over its rounds.

With ``--interleave`` the user's loops sample the calibration's own moments instead: the benchmark
calibrates in its own process (``hsisim.api.calibrate`` with the CLI's options) and, while the
calibration waits, runs the script's loop (a fresh ``python`` process, as above) just before and
just after each of the interference probe's rounds (``_Meetings.round``), whose loops carry the
prediction. The prediction is compared with the mean of those loops. On this 2-core VM the pace
moves by up to a quarter within a minute, and a --quick calibration's rounds began at 4.6, 26.5
and 28.9 s of 30 s, so loops run tens of seconds away from the rounds sample other moments.

With ``--lever`` (and ``--interleave``), the script's loop also runs under ``OPENBLAS_NUM_THREADS=1`` at each of
those moments (the user following the threaded-build warning's advice), and the same calibration predicts it with
``dataset.blas_threads: 1``: the loops calibration runs again at one BLAS thread where the build runs BLAS threads
of its own (rows "CONFIG at 1 BLAS thread"; a configuration whose build runs none has no such row).

Each loop is read with the machine's pace just before and just after it (``user_loop/pace.py``, a
second of small SVDs at numpy's default threads, which imports nothing from hsisim): on the 2-core
VM it reads one of two paces, 187-226 or 444-481 ms (now and then 157-161), each held for tens of
seconds, and the loops' steps move with it. A loop whose pace before and after differ straddled a change. Last, each
round's prediction is set against the loops that held the pace calibration held (the readings just
before and just after its rounds, or the whole calibration without ``--interleave``; a reading over
1.5x the run's fastest is the slow pace), where its readings show one pace. The pace probe does not
catch every change of the machine's pace: loops at its fast reading ran at 14.1-19.1 ms (offline5).

Last of all, the machine's floor: the user's loops set against each other, as if half of them were the prediction
(every second loop against the rest), and how many single loops fall within 10 % of the others' mean. Where two
halves of the same user's loops part by more than the targets, so may any prediction, however faithful its model.

Calibrations are full, as ``hsisim calibrate`` runs by default (longer loops where a build runs threads of its own,
three rounds always; several minutes a calibration for the getitem configurations), unless ``--quick`` is given
(``--full``, the default, is still accepted). Full is the default since December 2026: a user calibrates without
``--quick`` unless they ask for it, and a ``--quick`` calibration of a threaded build reads two or three blocks of a
machine whose pace swings between two levels (getitem9 once +49.8 %).

With ``--threaded-loop-s S`` (and ``--interleave``, whose calibration runs in this process) each loop of a full
calibration runs S seconds or longer where the build runs threads of its own, instead of
``calibration.threads.THREADED_LOOP_S`` (20 s): how long calibration must sample a machine whose pace swings between
two levels for minutes at a time. The log keeps S (``threaded_loop_s``). Two rounds of getitem11 at 80 s read +30.5 and
+8.9 % (docs/model.md, "Longer loops do not reach the mean").

With ``--log FILE`` each round's comparison is also appended to FILE as one JSON line (the date, the hsisim commit,
every loop and reading in the table), so that sittings on other days pool: ``cpu_sharing_summary.py FILE``.
"""

from __future__ import annotations

import json
import math
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import TypeVar

HERE = Path(__file__).resolve().parent / "user_loop"
SCRIPT = HERE / "hamida_user.py"
PACE = HERE / "pace.py"  # the machine's pace for threads that wait on each other (one of two, on the 2-core VM)
STEPS = 150
SCENARIO = """
name: user_{config}
dataset: {{factory: "hamida_user.py:make_dataset", kwargs: {{patch: {patch}, preprocess: {preprocess}}}{blas}}}
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


def _run(cmd: list[str], cwd: Path, env: dict[str, str] | None = None) -> str:
    """A child's stdout; where it fails, its stderr too, then the error."""
    try:
        return subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=True, env=env).stdout
    except subprocess.CalledProcessError as e:
        print(e.stderr, file=sys.stderr)
        raise


def _hsisim(*args: str, cwd: Path) -> dict[str, object]:
    return json.loads(_run([sys.executable, "-m", "hsisim", *args], cwd))


def _kwargs(cfg: dict[str, object]) -> str:
    return json.dumps({"dataset": {"patch": cfg["patch"], "preprocess": cfg["preprocess"]},
                       "model": {"patch": cfg["patch"]}})


def predict(config: str, cfg: dict[str, object], work: Path, quick: bool = False) -> dict[str, float]:
    """The user's view: calibrate on the script's factories, then run a scenario that names them."""
    profile = work / f"{config}.json"
    _hsisim("calibrate", "--device", "cpu", *(["--quick"] if quick else []), "--model-factory",
            "hamida_user.py:make_model", "--dataset-factory", "hamida_user.py:make_dataset", "--factory-kwargs",
            _kwargs(cfg), "--batch", str(cfg["batch"]), "--out", str(profile), "--json", cwd=work)
    return readout(config, cfg, work, profile)


Compared = tuple[dict[str, float], list[dict[str, float]]]


def predict_interleaved(config: str, cfg: dict[str, object], work: Path, lever: bool = False, quick: bool = False,
                        threaded_loop_s: float | None = None) -> tuple[Compared, Compared | None]:
    """A calibration with the CLI's options, in this process (after the first, one that has calibrated
    before: its probe's loop ran at 1.003x the user's beside it, 2-core VM), with the user's loop run just
    before and just after each interference round while the calibration waits; the prediction and those
    loops. The rounds' span and the calibration's seconds leave out the loops' time. ``lever``: the user's
    loop also runs under ``OPENBLAS_NUM_THREADS=1`` at each of those moments, and the same profile predicts it
    with ``dataset.blas_threads: 1`` (the loops calibration ran at one BLAS thread). ``threaded_loop_s``: each loop's
    least length where the build runs threads of its own, in place of ``threads.THREADED_LOOP_S``."""
    from unittest import mock

    from hsisim import api
    from hsisim.calibration import threads
    from hsisim.calibration.run import _Meetings

    real, runs, runs1 = _Meetings.round, [], []

    def bracketed(meet: _Meetings, spare: bool = False) -> None:  # the round's own timing stays the round's
        due = meet.due(spare)
        if due:
            runs.append(measure(config, work))
            if lever:
                runs1.append(measure(config, work, one_blas=True))
        real(meet, spare)
        if due:
            if lever:
                runs1.append(measure(config, work, one_blas=True))
            runs.append(measure(config, work))

    profile, here = work / f"{config}.json", Path.cwd()
    os.chdir(work)  # where the CLI would run: the factories' module is found from the current directory
    try:
        least = threads.THREADED_LOOP_S if threaded_loop_s is None else threaded_loop_s
        with mock.patch.object(_Meetings, "round", bracketed), mock.patch.object(threads, "THREADED_LOOP_S", least):
            api.calibrate(device="cpu", quick=quick, model_factory="hamida_user.py:make_model",
                          dataset_factory="hamida_user.py:make_dataset", factory_kwargs=_kwargs(cfg),
                          batch=int(cfg["batch"]), out=profile)  # type: ignore[call-overload]
    finally:
        os.chdir(here)
    if lever and "interference_one_blas" not in json.loads(profile.read_text())["data"]["modes"]["factory"]:
        print(f"{config}: calibration ran no loops at one BLAS thread (the build runs no BLAS threads of its own)",
              file=sys.stderr, flush=True)
        lever = False
    out = []
    for one_blas in (False, True) if lever else (False,):
        p = readout(config, cfg, work, profile, one_blas)
        p["calibrate_s"] -= sum(u["wall_s"] for u in runs + runs1)  # the calibration's own time, without the loops
        p["span_s"] -= sum(u["wall_s"] for u in runs[1:-1] + runs1[1:-1])  # the first round's start to the last's
        out.append((p, runs1 if one_blas else runs))
    return out[0], out[1] if lever else None


def readout(config: str, cfg: dict[str, object], work: Path, profile: Path, one_blas: bool = False
            ) -> dict[str, float]:
    """``hsisim run`` on a scenario naming the script's factories and ``profile`` (``one_blas``: with
    ``dataset.blas_threads: 1``): the predicted step and data wait, and what calibration's own loop measured."""
    scen = work / f"{config}.yaml"
    scen.write_text(SCENARIO.format(config=config, steps=STEPS, profile=profile,
                                    blas=", blas_threads: 1" if one_blas else "", **cfg))
    m = _hsisim("run", str(scen), "--json", "--allow-code", "--no-compare", "--no-levers", "--executor", "inline",
                cwd=work)["metrics"]
    busy = sum(m[f"t_{t}_h"]["mean"] for t in ("compute", "data", "comm", "stall")) * 3600  # type: ignore[index]
    # what calibration's own loop measured (the interference probe, at this batch and worker count)
    calibrated = json.loads(profile.read_text())
    it = calibrated["data"]["modes"]["factory"]["interference_one_blas" if one_blas else "interference"]
    w = int(cfg["workers"])  # type: ignore[call-overload]
    row = it["inline"] if w == 0 else it["workers"][w - 1]
    loop = (row["build_s"] + row["step_s"], row["build_s"]) if w == 0 else (row["loop_step_s"], row["loop_wait_s"])
    step = busy / STEPS
    if "block_step_s" in row:  # the fastest and slowest 10-step block calibration's loops ran
        lo, hi = row["block_step_s"]
        n = f"{row['block_n']} " if "block_n" in row else ""
        print(f"calibration's loop, {n}blocks {lo * 1e3:.0f}-{hi * 1e3:.0f} ms a step; a build alone kept "
              f"{it.get('worker_build', {}).get('cores', float('nan')):.2f} cores busy", file=sys.stderr, flush=True)
    if w == 0 and "near" in row:  # the loop's steps fell in two paces: the prediction mixes them
        ms = it.get("machine_state")
        read = (f"slow in {ms.get('far', 0)} of {ms['readings']} readings" if ms else "not read")
        print(f"calibration's loop at two paces: {sum(row['near'][k] for k in ('build_s', 'step_s')) * 1e3:.0f} ms "
              f"({row['near']['steps']} steps) and {sum(row['far'][k] for k in ('build_s', 'step_s')) * 1e3:.0f} ms "
              f"({row['far']['steps']}); the machine's state between its loops {read}", file=sys.stderr, flush=True)
    if abs(step / loop[0] - 1) > 0.05:  # the model, not the moment, parts from the probe's loop: show its paces
        print(f"prediction {step * 1e3:.1f} ms against calibration's own loop {loop[0] * 1e3:.1f} ms; its "
              f"paces: {json.dumps(row)}, step alone {it['step_alone_s']}", file=sys.stderr, flush=True)
    return {"step_s": step, "wait_share": m["t_data_h"]["mean"] * 3600 / busy,  # type: ignore[index]
            "probe_step_s": loop[0], "probe_wait_share": loop[1] / loop[0],
            "calibrate_s": calibrated["probe_seconds"], "rounds": it.get("rounds", 0), "span_s": it.get("span_s", 0.0),
            # the loop without workers' two paces and the machine's state between the loops, where calibration kept them
            **{key: row[key] for key in ("near", "far") if w == 0 and key in row},
            **({"machine_state": it["machine_state"]} if "machine_state" in it else {})}


def _pace(work: Path) -> float:
    """``pace.py``'s batch of small SVDs (ms): which of the machine's paces holds now."""
    return float(json.loads(_run([sys.executable, str(PACE)], work))["batch_ms"])


def measure(config: str, work: Path, one_blas: bool = False) -> dict[str, float]:
    """The script's own loop, as the user runs it, with the machine's pace read just before and just after it;
    ``one_blas``: the script started under ``OPENBLAS_NUM_THREADS=1``, as ``hsisim run``'s warning advises."""
    t0 = time.perf_counter()
    before = _pace(work)
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1"} if one_blas else None
    d = json.loads(_run([sys.executable, str(SCRIPT), config, str(STEPS)], work, env))
    after = _pace(work)
    step, wait = d["step_s"], d["wait_s"]
    from hsisim.calibration.interference import blocks  # as calibration's loops are read (the user's imports nothing)
    from hsisim.profile import BLOCK

    tens = blocks(step)
    where = " at OPENBLAS_NUM_THREADS=1" if one_blas else ""
    print(f"user loop{where}: {statistics.fmean(step) * 1e3:.1f} ms, {BLOCK}-step blocks {min(tens) * 1e3:.0f}-"
          f"{max(tens) * 1e3:.0f} ms; the machine's pace {before:.0f} ms before, {after:.0f} ms after",
          file=sys.stderr, flush=True)
    return {"step_s": statistics.fmean(step), "wait_share": sum(wait) / sum(step), "threads": d["torch_threads"],
            "wall_s": time.perf_counter() - t0, "pace_before_ms": before, "pace_after_ms": after}


def _flag(argv: list[str], flag: str) -> tuple[bool, list[str]]:
    return flag in argv, [a for a in argv if a != flag]


def _option(argv: list[str], flag: str, takes: str) -> tuple[str | None, list[str]]:
    """``flag``'s value and the arguments without both (None where the flag is absent); ``takes`` says what the
    value is where it is missing."""
    if flag not in argv:
        return None, argv
    i = argv.index(flag)
    if i + 1 >= len(argv):
        sys.exit(f"{flag} takes {takes}")
    return argv[i + 1], argv[:i] + argv[i + 2:]


def _commit(root: Path | None = None) -> str:
    """The commit of the hsisim checkout this benchmark imports, or of the checkout at ``root`` (``+`` where its tree
    has changes), or ``?``."""
    if root is None:
        import hsisim

        root = Path(hsisim.__file__).resolve().parent.parent
    try:
        head = _run(["git", "rev-parse", "--short", "HEAD"], root).strip()
        dirty = _run(["git", "status", "--porcelain", "--untracked-files=no"], root).strip()
    except (OSError, subprocess.CalledProcessError):
        return "?"
    return head + ("+" if dirty else "")


def record(name: str, r: int, p: dict[str, float], runs: list[dict[str, float]], interleave: bool, quick: bool,
           commit: str, threaded_loop_s: float | None = None) -> dict[str, object]:
    """One round's comparison as ``--log`` keeps it (milliseconds and per cent, as the table; ``threaded_loop_s``
    only where ``--threaded-loop-s`` set it)."""
    least = {} if threaded_loop_s is None else {"threaded_loop_s": threaded_loop_s}
    return {"date": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "commit": commit, "config": name, "round": r + 1,
            "interleave": interleave, "quick": quick, **least,
            "user_step_ms": [round(u["step_s"] * 1e3, 3) for u in runs],
            "user_wait_pct": [round(100 * u["wait_share"], 2) for u in runs],
            "pace_ms": [[round(u["pace_before_ms"]), round(u["pace_after_ms"])] for u in runs],
            "predicted_step_ms": round(p["step_s"] * 1e3, 3), "predicted_wait_pct": round(100 * p["wait_share"], 2),
            "probe_step_ms": round(p["probe_step_s"] * 1e3, 3),
            "probe_wait_pct": round(100 * p["probe_wait_share"], 2), "calibrate_s": round(p["calibrate_s"], 1),
            **{key: p[key] for key in ("near", "far", "machine_state") if key in p}}


def _user_runs(argv: list[str]) -> tuple[int, list[str]]:
    takes = "a whole number of loops before and after each calibration, at least 1"
    value, argv = _option(argv, "--user-runs", takes)
    if value is None:
        return 2, argv
    if not value.isdigit() or int(value) < 1:
        sys.exit(f"--user-runs takes {takes}")
    return int(value), argv


Default = TypeVar("Default", bound=float | None)


def _positive(argv: list[str], flag: str, convert: type, default: Default) -> tuple[float | Default, list[str]]:
    """``flag``'s value, a finite number over 0 (``default`` where the flag is absent), and the arguments without
    both (``_option``)."""
    text, argv = _option(argv, flag, "a number")
    if text is None:
        return default, argv
    try:
        value = convert(text)
    except ValueError:
        sys.exit(f"{flag} takes a number, not {text!r}")
    if not 0 < value < math.inf:
        sys.exit(f"{flag} takes a positive number, not {text!r}")
    return value, argv


def t95(dof: int) -> float:
    """Student's t, two-sided 95 %, at ``dof`` degrees of freedom."""
    from scipy import stats

    return float(stats.t.ppf(0.975, dof))


def ci95(xs: list[float]) -> float:
    """Half-width of the 95 % confidence interval of the mean of ``xs`` (Student's t)."""
    return t95(len(xs) - 1) * statistics.stdev(xs) / len(xs) ** 0.5 if len(xs) > 1 else 0.0


SLOW = 1.5  # a pace reading over 1.5x the run's fastest is the slow pace (2-core VM: 157-226 against 444-481 ms)


def calibration_paces(runs: list[dict[str, float]], interleave: bool, k: int) -> list[float]:
    """The pace readings next to calibration's measurements: the readings just before and just after each
    interference round (interleaved), or just before and just after the whole calibration."""
    if interleave:  # the loops come in pairs, one just before and one just after each round
        return [x for i in range(0, len(runs) - 1, 2)
                for x in (runs[i]["pace_after_ms"], runs[i + 1]["pace_before_ms"])]
    return [runs[k - 1]["pace_after_ms"], runs[k]["pace_before_ms"]]


def matched(name: str, r: int, p: dict[str, float], runs: list[dict[str, float]], cal: list[float],
            fastest: float) -> str:
    """The prediction against the user's loops that held the pace calibration's rounds held, where they held one."""
    def slow(reading: float) -> bool:
        return reading > SLOW * fastest

    paces = {slow(x) for x in cal}
    if len(paces) > 1:
        return f"  {name} round {r}: calibration's readings met both paces ({', '.join(f'{x:.0f}' for x in cal)} ms)"
    pace = paces.pop()
    same = [u for u in runs if slow(u["pace_before_ms"]) == pace == slow(u["pace_after_ms"])]
    head = f"  {name} round {r}: calibration at the {'slow' if pace else 'fast'} pace"
    if not same:
        return f"{head}; none of the user's loops held it throughout"
    step, wait = (statistics.fmean(u[key] for u in same) for key in ("step_s", "wait_share"))
    return (f"{head}; the prediction {p['step_s'] * 1e3:.1f} ms against the {len(same)} loop(s) that held it, "
            f"{step * 1e3:.1f} ms: {100 * (p['step_s'] / step - 1):+.1f} %, data wait "
            f"{100 * (p['wait_share'] - wait):+.1f} points")


def floor(runs: list[dict[str, float]]) -> tuple[float, float, int]:
    """What the machine lets any prediction reach, from the user's loops alone: every second loop against the others
    (with --interleave, those just after each round against those just before it: each half samples every round's
    moments, as the prediction does), step error (%) and data wait (points), and how many single loops fall within
    10 % of the mean of the others."""
    half = [runs[0::2], runs[1::2]]
    m = [{key: statistics.fmean(u[key] for u in h) for key in ("step_s", "wait_share")} for h in half]
    near = sum(abs(u["step_s"] / statistics.fmean(v["step_s"] for v in runs if v is not u) - 1) <= 0.10
               for u in runs)
    return 100 * (m[1]["step_s"] / m[0]["step_s"] - 1), 100 * (m[1]["wait_share"] - m[0]["wait_share"]), near


def _row(name: str, r: int, p: dict[str, float], runs: list[dict[str, float]]) -> None:
    """One round's line of the table: the prediction against the user's loops around it."""
    steps, waits = [u["step_s"] for u in runs], [u["wait_share"] for u in runs]
    m = {key: statistics.fmean(u[key] for u in runs) for key in ("step_s", "wait_share")}
    err = 100 * (p["step_s"] / m["step_s"] - 1)
    pts = 100 * (p["wait_share"] - m["wait_share"])
    paces = ", ".join(f"{u['pace_before_ms']:.0f}/{u['pace_after_ms']:.0f}" for u in runs)
    print(f"| {name} | {r + 1} | {', '.join(f'{x * 1e3:.1f}' for x in steps)} | "
          f"{m['step_s'] * 1e3:.1f} ± {ci95(steps) * 1e3:.1f} ms | {p['step_s'] * 1e3:.1f} ms | "
          f"{err:+.1f} % | {', '.join(f'{100 * w:.1f}' for w in waits)} | "
          f"{m['wait_share']:.1%} | {p['wait_share']:.1%} | {pts:+.1f} | "
          f"{p['probe_step_s'] * 1e3:.1f} ms, {p['probe_wait_share']:.1%} | {p['rounds']:.0f} over "
          f"{p['span_s']:.0f} s | {p['calibrate_s']:.0f} | {paces} |", flush=True)


def main() -> None:
    interleave, argv = _flag(sys.argv[1:], "--interleave")
    lever, argv = _flag(argv, "--lever")
    log, argv = _option(argv, "--log", "a file name")
    quick, argv = _flag(argv, "--quick")
    full, argv = _flag(argv, "--full")
    if quick and full:
        sys.exit("--quick and --full: a calibration is one or the other (full is the default)")
    if interleave and "--user-runs" in argv:
        sys.exit("--interleave runs the user's loop around each interference round: it takes no --user-runs")
    if lever and not interleave:
        sys.exit("--lever runs the user's loop under OPENBLAS_NUM_THREADS=1 beside the default one around each "
                 "interference round: it goes with --interleave")
    threaded_loop_s, argv = _positive(argv, "--threaded-loop-s", float, None)
    if threaded_loop_s is not None and (quick or not interleave):
        sys.exit("--threaded-loop-s lengthens a full calibration's loops in this process: it goes with --interleave, "
                 "not --quick")
    k, argv = _user_runs(argv)
    rounds = int(argv[0]) if argv else 2
    configs = _configs()
    names = argv[1:] or list(configs)
    print("| config | round | user's loops, step (ms) | mean ± 95 % CI | step predicted | error | user's loops, data "
          "wait (%) | mean | predicted | error (points) | calibration's own loop: step, data wait | its rounds | "
          "calibrate (s) | the machine's pace before/after each loop (ms) |")
    print("|---|---:|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---:|---|")
    commit = _commit() if log else ""
    pooled: dict[str, list[dict[str, float]]] = {}
    loops: dict[str, list[float]] = {}
    paced: list[tuple[str, int, dict[str, float], list[dict[str, float]], list[float]]] = []
    with tempfile.TemporaryDirectory() as d:
        work = Path(d)
        (work / "hamida_user.py").write_text(SCRIPT.read_text())
        for name in names:
            for r in range(rounds):
                if interleave:
                    default, limited = predict_interleaved(name, configs[name], work, lever, quick,
                                                           threaded_loop_s)
                else:
                    runs = [measure(name, work) for _ in range(k)]
                    p = predict(name, configs[name], work, quick)
                    runs += [measure(name, work) for _ in range(k)]
                    default, limited = (p, runs), None
                compared = [(name, default)] + ([(f"{name} at 1 BLAS thread", limited)] if limited else [])
                for label, (p, runs) in compared:
                    _row(label, r, p, runs)
                    if log:
                        with open(log, "a") as f:
                            f.write(json.dumps(record(label, r, p, runs, interleave, quick, commit,
                                                      threaded_loop_s)) + "\n")
                    m = {key: statistics.fmean(u[key] for u in runs) for key in ("step_s", "wait_share")}
                    pooled.setdefault(label, []).append({**{f"m_{key}": v for key, v in m.items()}, **p})
                    loops.setdefault(label, []).extend(u["step_s"] for u in runs)
                    paced.append((label, r + 1, p, runs, calibration_paces(runs, interleave, k)))
    print("\npooled over the rounds (mean of the predictions against the mean of every loop, its 95 % CI):")
    for name, rows in pooled.items():
        mean = {key: statistics.fmean(r[key] for r in rows)
                for key in ("m_step_s", "step_s", "m_wait_share", "wait_share")}
        every = loops[name]
        print(f"  {name}: step {100 * (mean['step_s'] / mean['m_step_s'] - 1):+.1f} % (loops "
              f"{statistics.fmean(every) * 1e3:.1f} ± {ci95(every) * 1e3:.1f} ms, sd "
              f"{statistics.stdev(every) / statistics.fmean(every):.0%} of a loop, n {len(every)}; predictions "
              f"{min(r['step_s'] for r in rows) * 1e3:.1f}-{max(r['step_s'] for r in rows) * 1e3:.1f} ms), data wait "
              f"{100 * (mean['wait_share'] - mean['m_wait_share']):+.1f} points")

    print("\nthe machine's floor, from the user's loops alone (every second loop against the others: step, data "
          "wait; single loops within 10 % of the mean of the others in their round):")
    for name, r, _, runs, _ in paced:
        step, wait, near = floor(runs)
        print(f"  {name} round {r}: one half against the other {step:+.1f} %, {wait:+.1f} points; {near} of "
              f"{len(runs)} single loops within 10 %")

    fastest = min(u[key] for *_, runs, _ in paced for u in runs for key in ("pace_before_ms", "pace_after_ms"))
    print(f"\nat the pace calibration held (a reading over {SLOW}x the fastest, {fastest:.0f} ms, is the slow pace; a "
          "loop holds a pace when its readings before and after both show it):")
    for row in paced:
        print(matched(*row, fastest))


if __name__ == "__main__":
    main()
