"""The user's own model and dataset code: ``MODULE:CALLABLE`` or ``path/to/file.py:CALLABLE`` factories.

A model factory returns a ``torch.nn.Module`` taking a batch of samples; a dataset factory returns a
``torch.utils.data.Dataset`` whose items are ``(x, y)`` with ``x`` a tensor (one sample) and ``y`` a
class index. Keyword arguments come from ``--factory-kwargs`` / the scenario's ``kwargs``: either
``{"model": {...}, "dataset": {...}}`` or one flat object whose keys each factory receives when its
signature accepts them. Anything that goes wrong is an input error naming the factory.
"""

from __future__ import annotations

import contextlib
import hashlib
import importlib
import importlib.util
import inspect
import json
import math
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.utils.data import Dataset, default_collate

from hsisim.calibration.probes import Net
from hsisim.errors import HsisimInputError


@dataclass(frozen=True)
class Factory:
    spec: str
    fn: Callable[..., Any]
    file: str | None
    sha256: str | None
    role: str  # the flag or scenario key it came from, for messages

    def record(self) -> dict[str, Any]:
        return {"factory": self.spec, "file": self.file, "sha256": self.sha256}


def load_factory(spec: str, role: str) -> Factory:
    """Import ``spec`` (the current directory is on ``sys.path``); ``role`` names the flag in messages."""
    target, sep, attr = spec.rpartition(":")
    if not sep or not target or not attr.isidentifier():
        raise HsisimInputError(f"{role} expects MODULE:CALLABLE or path/to/file.py:CALLABLE, got {spec!r}")
    cwd = str(Path.cwd())
    if cwd not in sys.path:
        sys.path.insert(0, cwd)
    try:
        if target.endswith(".py") or "/" in target:
            path = Path(target)
            if not path.is_file():
                raise HsisimInputError(f"{role} {spec}: no file {path}")
            name = "hsisim_user_" + hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:12]
            loader_spec = importlib.util.spec_from_file_location(name, path)
            assert loader_spec is not None and loader_spec.loader is not None
            module = importlib.util.module_from_spec(loader_spec)
            sys.modules[name] = module
            loader_spec.loader.exec_module(module)
        else:
            module = importlib.import_module(target)
    except HsisimInputError:
        raise
    except Exception as exc:  # the user's module may raise anything while importing
        raise HsisimInputError(f"{role} {spec}: cannot import {target} ({type(exc).__name__}: {exc})") from None
    fn = getattr(module, attr, None)
    if fn is None:
        raise HsisimInputError(f"{role} {spec}: {target} has no attribute {attr!r}")
    if not callable(fn):
        raise HsisimInputError(f"{role} {spec}: {attr} is a {type(fn).__name__}, not a callable")
    src = getattr(module, "__file__", None)
    digest = hashlib.sha256(Path(src).read_bytes()).hexdigest() if src and Path(src).is_file() else None
    return Factory(spec, fn, str(Path(src).resolve()) if src else None, digest, role)


def split_kwargs(text_or_obj: str | dict[str, Any] | None) -> tuple[dict[str, Any], dict[str, Any], bool]:
    """(model kwargs, dataset kwargs, flat?) from ``--factory-kwargs``."""
    if text_or_obj is None:
        return {}, {}, False
    if isinstance(text_or_obj, str):
        try:
            obj = json.loads(text_or_obj)
        except ValueError as exc:
            raise HsisimInputError(f"{{factory_kwargs}} is not JSON: {exc}") from None
    else:
        obj = text_or_obj
    if not isinstance(obj, dict):
        raise HsisimInputError("{factory_kwargs} must be a JSON object")
    if obj and set(obj) <= {"model", "dataset"} and all(isinstance(v, dict) for v in obj.values()):
        return dict(obj.get("model", {})), dict(obj.get("dataset", {})), False
    return dict(obj), dict(obj), True


def _call(f: Factory, kwargs: dict[str, Any], flat: bool) -> Any:
    if flat:
        params: dict[str, inspect.Parameter] = {}
        with contextlib.suppress(TypeError, ValueError):  # builtins without a signature get everything
            params = dict(inspect.signature(f.fn).parameters)
        if not any(p.kind is inspect.Parameter.VAR_KEYWORD for p in params.values()):
            kwargs = {k: v for k, v in kwargs.items() if k in params}
    try:
        return f.fn(**kwargs)
    except Exception as exc:  # the user's code may raise anything
        raise HsisimInputError(f"{f.role} {f.spec} raised {type(exc).__name__}: {exc}") from None


def make_dataset(f: Factory, kwargs: dict[str, Any], flat: bool = False, batch: int | None = None
                 ) -> tuple[Dataset, tuple[int, ...]]:
    """The user's Dataset and the shape of one sample; checks what an item looks like, and that it holds
    one ``batch`` at least (the probes' and the real run's DataLoaders drop a last incomplete batch: from
    a smaller dataset they have nothing to yield)."""
    role = f.role
    ds = _call(f, kwargs, flat)
    if not (hasattr(ds, "__getitem__") and hasattr(ds, "__len__")):
        raise HsisimInputError(f"{role} {f.spec} returned a {type(ds).__name__}, not a torch Dataset "
                               "(__getitem__ and __len__)")
    try:
        n = len(ds)
        item = ds[0]
    except Exception as exc:
        raise HsisimInputError(f"{role} {f.spec}: reading item 0 raised {type(exc).__name__}: {exc}") from None
    if n < 1:
        raise HsisimInputError(f"{role} {f.spec} returned an empty dataset")
    if not (isinstance(item, tuple | list) and len(item) == 2 and isinstance(item[0], torch.Tensor)):
        raise HsisimInputError(f"{role} {f.spec}: items must be (x, y) with x a tensor, got {type(item).__name__}")
    if batch is not None and n < batch:
        raise HsisimInputError(f"{role} {f.spec} returned {n} samples, fewer than one batch of {batch}: a "
                               "DataLoader that drops the last incomplete batch has nothing to yield")
    return ds, tuple(item[0].shape)


def dataset_classes(ds: Any) -> int:
    """The class count a catalog model needs from a user's Dataset (its ``classes`` or ``num_classes``)."""
    classes = int(getattr(ds, "classes", 0) or getattr(ds, "num_classes", 0) or 0)
    if not classes:
        raise HsisimInputError("a catalog model on a dataset factory needs the class count: give the Dataset a "
                               "'classes' or 'num_classes' attribute", key="dataset.factory")
    return classes


def make_net(f: Factory, kwargs: dict[str, Any], sample_shape: tuple[int, ...], flat: bool = False) -> Net:
    """A ``Net`` that builds the user's model; the class count is read from its output."""
    role = f.role
    model = _call(f, kwargs, flat)
    if not isinstance(model, nn.Module):
        raise HsisimInputError(f"{role} {f.spec} returned a {type(model).__name__}, not a torch.nn.Module")
    try:
        with torch.no_grad():
            out = model.eval()(torch.zeros(2, *sample_shape))
    except Exception as exc:
        raise HsisimInputError(f"{role} {f.spec}: a batch of samples shaped {list(sample_shape)} fails in forward "
                               f"({type(exc).__name__}: {exc})") from None
    if not isinstance(out, torch.Tensor) or out.ndim != 2 or out.shape[0] != 2:
        raise HsisimInputError(f"{role} {f.spec}: forward must return logits (batch, classes), got "
                               f"{getattr(out, 'shape', type(out).__name__)}")

    def build() -> nn.Module:
        return _call(f, kwargs, flat)

    return Net(f.spec, build, sample_shape, int(out.shape[1]))


def module_stats(model: nn.Module, sample_shape: tuple[int, ...]) -> dict[str, Any]:
    """Parameters, forward FLOPs (``torch.utils.flop_counter``), activation elements and kernel-launching layers."""
    from torch.utils.flop_counter import FlopCounterMode

    acts: list[int] = []
    hooks = [m.register_forward_hook(lambda _m, _i, o: acts.append(o.numel() if isinstance(o, torch.Tensor) else 0))
             for m in model.modules() if not list(m.children())]
    model.eval()
    try:
        with FlopCounterMode(display=False) as counter, torch.no_grad():
            model(torch.zeros(1, *sample_shape))
    finally:
        for h in hooks:
            h.remove()
        model.train()
    params = sum(p.numel() for p in model.parameters() if p.requires_grad)
    return {"params": params, "fwd_flops": float(counter.get_total_flops()),
            "act_elems": int(sum(acts) + math.prod(sample_shape)), "ops": max(1, len(acts))}


def sample_costs(ds: Dataset, batch: int, samples: int = 64) -> dict[str, float]:
    """A quick in-process measurement of ``__getitem__`` and collate (when no profile measured them)."""
    n = len(ds)  # type: ignore[arg-type]
    idx = [int(i) for i in torch.randint(0, n, (samples,))]
    each = []
    items = []
    for i in idx:
        t0 = time.perf_counter()
        items.append(ds[i])
        each.append(time.perf_counter() - t0)
    t0 = time.perf_counter()
    default_collate(items[:batch])
    collate = time.perf_counter() - t0
    mean = statistics.fmean(each)
    return {"per_sample_s": mean, "per_sample_cv": statistics.stdev(each) / mean if len(each) > 1 and mean else 0.0,
            "collate_s": collate * batch / min(batch, len(items))}


@dataclass(frozen=True)
class ScenarioParts:
    """What a scenario's factories contribute to its ``Job``."""

    params: int
    fwd_flops: float
    act_elems: int
    ops: int
    sample_shape: tuple[int, ...]
    classes: int
    samples: int | None  # len(dataset) for a dataset factory
    sample_bytes: float
    per_sample_s: float | None  # measured here when a dataset factory has no profile
    per_sample_cv: float
    collate_s: float
    notes: tuple[str, ...]


def scenario_parts(sc: Any, micro_batch: int, builtin_shape: tuple[int, ...] | None, builtin_classes: int | None,
                   builtin_stats: Callable[[tuple[int, ...], int], Any] | None, measure_data: bool) -> ScenarioParts:
    """Build the scenario's factories (``model.factory`` / ``dataset.factory``) and measure what the Job needs."""
    notes: list[str] = []
    ds = None
    samples = None
    if sc.dataset.factory is not None:
        df = load_factory(sc.dataset.factory, "dataset.factory")
        ds, shape = make_dataset(df, dict(sc.dataset.kwargs))
        samples = len(ds)  # type: ignore[arg-type]
    else:
        assert builtin_shape is not None
        shape = builtin_shape
    if sc.model.factory is not None:
        mf = load_factory(sc.model.factory, "model.factory")
        net = make_net(mf, dict(sc.model.kwargs), shape)
        st = module_stats(net.build(), shape)
        classes = net.classes
        params, flops, act, ops = st["params"], st["fwd_flops"], st["act_elems"], st["ops"]
        notes.append(f"model {mf.spec}: {params:,} parameters, {flops / 1e6:,.2f} MFLOP forward per sample "
                     "(torch.utils.flop_counter)")
    else:
        classes = builtin_classes or dataset_classes(ds)
        assert builtin_stats is not None
        stats = builtin_stats(shape, classes)
        params, flops, act, ops = stats.params, stats.fwd_flops, stats.act_elems, stats.ops
    per_sample = None
    cv = 0.0
    collate = 0.0
    item_bytes = float(math.prod(shape) * 4)
    if ds is not None:
        x = ds[0][0]
        item_bytes = float(x.numel() * x.element_size())
        if measure_data:
            m = sample_costs(ds, micro_batch)
            per_sample, cv, collate = m["per_sample_s"], m["per_sample_cv"], m["collate_s"]
            notes.append(f"{sc.dataset.factory}: __getitem__ measured here, {per_sample * 1e6:,.0f} us per sample "
                         "(calibrate for a fuller measurement)")
    return ScenarioParts(int(params), float(flops), int(act), int(ops), tuple(shape), int(classes), samples,
                         item_bytes, per_sample, cv, collate, tuple(notes))
