"""The catalog: every name resolves, unknown names list the known ones, model arithmetic is right."""

from __future__ import annotations

from importlib import resources

import pytest
import yaml

from hsisim import catalog
from hsisim.catalog import hsi_models
from hsisim.errors import HsisimInputError


def test_every_instance_resolves_to_known_gpu_and_links() -> None:
    for name in catalog.names("instances"):
        inst = catalog.instance(name)
        gpu = catalog.gpu(inst.gpu)
        assert gpu.memory_bytes > 0 and inst.gpus >= 1
        assert catalog.link(inst.intra).effective_bytes_per_s > 0
        assert catalog.link(inst.network).effective_bytes_per_s > 0
        catalog.link(gpu.pcie)


def test_required_entries_exist() -> None:
    gpus = set(catalog.names("gpus"))
    assert {"rtx3090", "t4", "a10g", "l4", "v100", "a100_40gb", "a100_80gb", "h100", "h200"} <= gpus
    families = {n.split(".")[0] for n in catalog.names("instances")}
    assert {"g4dn", "g5", "p3", "p4d", "p5"} <= families
    assert {"pcie3", "pcie4", "pcie5", "nvlink2", "nvlink3", "nvlink4", "eth10", "eth25", "eth100", "efa400",
            "ib_hdr", "ib_ndr"} <= set(catalog.names("links"))
    assert {"indian_pines", "pavia_university", "salinas", "houston2013", "ksc", "botswana",
            "xiongan"} <= set(catalog.names("datasets"))
    assert {"hamida", "hybridsn", "ssrn", "spectralformer", "ssftt"} <= set(catalog.names("models"))


@pytest.mark.parametrize("kind", ["gpus", "links", "storage", "datasets", "models"])
def test_every_figure_says_where_it_comes_from(kind: str) -> None:
    data = yaml.safe_load(resources.files("hsisim.catalog").joinpath(f"{kind}.yaml").read_text())
    for name, entry in data.items():
        assert entry.get("source") or entry.get("paper"), f"{kind}/{name} has no source"


def test_effective_bandwidth_never_exceeds_line_rate() -> None:
    for name in catalog.names("links"):
        link = catalog.link(name)
        assert 0 < link.effective_bytes_per_s <= link.line_bytes_per_s, name


def test_tcp_ethernet_reaches_sixty_percent_of_line_rate() -> None:
    for name in ("eth10", "eth25", "eth100"):
        link = catalog.link(name)
        assert link.effective_bytes_per_s / link.line_bytes_per_s == pytest.approx(0.6)


def test_unknown_name_lists_known_ones() -> None:
    with pytest.raises(HsisimInputError) as err:
        catalog.instance("g9.huge")
    assert "g5.12xlarge" in str(err.value) and err.value.key == "cluster.instance"


def test_label_counts_match_the_real_ground_truth_maps() -> None:
    scipy_io = pytest.importorskip("scipy.io")
    from conftest import SHARED_DATA

    hsi = SHARED_DATA / "hsi"
    if not hsi.is_dir():
        pytest.skip("../shared/data/hsi is absent")
    maps = [("indian_pines", "Indian_pines_gt.mat", "indian_pines_gt"),
            ("pavia_university", "PaviaU_gt.mat", "paviaU_gt"), ("salinas", "Salinas_gt.mat", "salinas_gt")]
    for name, file, key in maps:
        gt = scipy_io.loadmat(hsi / file)[key]
        ds = catalog.dataset(name)
        assert gt.shape == (ds.rows, ds.cols)
        assert int((gt > 0).sum()) == ds.labelled
        assert int(gt.max()) == ds.classes


# --- HSI model arithmetic against published parameter counts ---------------------------------

def test_hybridsn_parameters_match_the_paper() -> None:
    # Roy et al. 2019, Table: 5,122,176 trainable parameters on Indian Pines (30 PCA, 25x25, 16 classes)
    assert hsi_models.hybridsn(30, 25, 16).params == 5_122_176


def test_hamida_parameters_match_deephyperx() -> None:
    # DeepHyperX HamidaEtAl on Indian Pines: 200 bands, 5x5 patches, 17 outputs → 46,107
    assert hsi_models.hamida(200, 5, 17).params == 46_107


def test_ssrn_parameters_match_the_paper() -> None:
    # Zhong et al. 2018: 364,168 parameters for Indian Pines with 7x7 patches
    assert hsi_models.ssrn(200, 7, 16).params == 364_168


def test_hybridsn_forward_flops_by_hand() -> None:
    # MACs of each layer = output elements × (in_channels × kernel volume)
    macs = (23 * 23 * 24 * 8 * 63          # conv3d 1→8, 3x3x7
            + 21 * 21 * 20 * 16 * 8 * 45   # conv3d 8→16, 3x3x5
            + 19 * 19 * 18 * 32 * 16 * 27  # conv3d 16→32, 3x3x3
            + 17 * 17 * 64 * 576 * 9       # conv2d 576→64, 3x3
            + 18496 * 256 + 256 * 128 + 128 * 16)
    assert hsi_models.hybridsn(30, 25, 16).fwd_flops == 2 * macs


def test_models_scale_with_their_input() -> None:
    small, big = hsi_models.hybridsn(30, 15, 16), hsi_models.hybridsn(30, 25, 16)
    assert big.params > small.params and big.fwd_flops > small.fwd_flops and big.act_elems > small.act_elems
    sf_a, sf_b = hsi_models.spectralformer(100, 7, 16), hsi_models.spectralformer(200, 7, 16)
    assert sf_b.fwd_flops > 2 * sf_a.fwd_flops  # attention is quadratic in the band tokens


def test_too_small_a_patch_is_a_clear_error() -> None:
    with pytest.raises(HsisimInputError, match="cannot take a 3x3 patch"):
        catalog.model("hybridsn").stats(30, 3, 16)
