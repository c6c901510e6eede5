"""The model and its input: parameters, FLOPs and activations per sample, bands, patch, samples.

From the catalog (a named HSI model on a named scene), or from the user's own PyTorch module and
``Dataset`` (factories, which need torch and run the user's code: only when allowed).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hsisim import catalog
from hsisim.errors import HsisimInputError
from hsisim.profile import Profile
from hsisim.scenario import Scenario


@dataclass(frozen=True)
class Workload:
    """What one sample costs the model, and how many samples there are."""

    stats: catalog.ModelStats
    out_bands: int  # bands the model consumes (after PCA)
    patch: int
    labelled: int  # samples in the scene before train_fraction and repeats
    dataset: catalog.Dataset | None
    model: catalog.ModelInfo | None
    factory: Any | None  # the measured parts of the user's factories (calibrate.factories.ScenarioParts)
    notes: tuple[str, ...] = ()


def workload(sc: Scenario, prof: Profile | None, *, allow_code: bool) -> Workload:
    """The scenario's model and data shapes."""
    ds = catalog.dataset(sc.dataset.name) if sc.dataset.name is not None else None
    minfo = catalog.model(sc.model.name) if sc.model.name is not None else None
    if ds is not None and minfo is not None:
        bands = _model_bands(sc, ds, minfo)
        assert sc.dataset.patch is not None
        return Workload(minfo.stats(bands, sc.dataset.patch, ds.classes), bands, sc.dataset.patch, ds.labelled,
                        ds, minfo, None)
    check_code_allowed(sc, allow_code)
    parts = _factory_parts(sc, prof, ds, minfo)
    stats = catalog.ModelStats(sc.model.name or str(sc.model.factory), parts.params, parts.fwd_flops,
                               parts.act_elems, parts.ops)
    shape = parts.sample_shape
    labelled = parts.samples if parts.samples is not None else (ds.labelled if ds is not None else 0)
    return Workload(stats, shape[0], shape[1] if len(shape) > 1 else 1, labelled, ds, minfo, parts,
                    tuple(parts.notes))


def check_code_allowed(sc: Scenario, allow_code: bool) -> None:
    """Refuse to run factories named in a scenario unless the user allowed code."""
    named = [(k, v) for k, v in (("model.factory", sc.model.factory), ("dataset.factory", sc.dataset.factory)) if v]
    if named and not allow_code:
        key, spec = named[0]
        raise HsisimInputError(f"this scenario would import and run {spec!r} (Python code named in the file); "
                               "if you trust it, pass {allow_code}", key=key)


def _factory_parts(sc: Scenario, prof: Profile | None, ds: catalog.Dataset | None,
                   minfo: catalog.ModelInfo | None) -> Any:
    """Build the user's factories (imports torch) and take parameters, FLOPs, sizes from the real objects."""
    try:
        from hsisim.calibration.factories import scenario_parts
    except ImportError:
        key = "model.factory" if sc.model.factory else "dataset.factory"
        raise HsisimInputError("model.factory / dataset.factory build your PyTorch code: pip install "
                               "'hsisim[torch]' torch==2.13.0", key=key) from None
    shape = classes = None
    if ds is not None:  # a catalog dataset feeding the user's model
        assert minfo is None and sc.dataset.patch is not None
        bands = sc.dataset.pca_components or ds.bands
        shape, classes = (bands, sc.dataset.patch, sc.dataset.patch), ds.classes

    def builtin(shape_: tuple[int, ...], classes_: int) -> catalog.ModelStats:
        assert minfo is not None
        return minfo.stats(shape_[0], shape_[1] if len(shape_) > 1 else 1, classes_)

    has_data = prof is not None and any(d.get("dataset_factory") == sc.dataset.factory for d in prof.data.values())
    return scenario_parts(sc, sc.training.micro_batch, shape, classes, builtin if minfo is not None else None,
                          measure_data=sc.dataset.factory is not None and not has_data)


def _model_bands(sc: Scenario, ds: catalog.Dataset, minfo: catalog.ModelInfo) -> int:
    if minfo.spectral_input == "pca":
        if sc.dataset.pca_components is None:
            raise HsisimInputError(f"{minfo.display} takes PCA components: set dataset.pca_components",
                                   key="dataset.pca_components")
        if sc.dataset.pca_components > ds.bands:
            raise HsisimInputError(f"{sc.dataset.pca_components} PCA components exceed the {ds.bands} bands "
                                   f"of {ds.display}", key="dataset.pca_components")
        return sc.dataset.pca_components
    return sc.dataset.pca_components or ds.bands
