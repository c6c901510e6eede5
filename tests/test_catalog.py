"""The catalog: every name resolves, every entry is sourced and consistent, model arithmetic is right."""

from __future__ import annotations

import datetime as dt
import re
from importlib import resources
from typing import Any

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


KINDS = ["gpus", "instances", "links", "storage", "datasets", "models"]


def _raw(kind: str) -> dict[str, Any]:
    data = yaml.safe_load(resources.files("hsisim.catalog").joinpath(f"{kind}.yaml").read_text())
    assert isinstance(data, dict)
    return data


def _is_past_date(value: object) -> bool:
    text = str(value)
    if not re.fullmatch(r"\d{4}(-\d{2}(-\d{2})?)?", text):
        return False
    year, month, day = (int(x) for x in [*text.split("-"), "1", "1"][:3])
    return dt.date(year, month, day) <= dt.date.today()


@pytest.mark.parametrize("kind", KINDS)
def test_every_entry_has_a_source_and_a_date(kind: str) -> None:
    for name, entry in _raw(kind).items():
        assert entry.get("source") or entry.get("paper"), f"{kind}/{name} has no source"
        assert _is_past_date(entry.get("as_of")), f"{kind}/{name}: as_of {entry.get('as_of')!r} is not a past date"
    cpu = _raw("cpu")
    assert cpu.get("source") and _is_past_date(cpu.get("as_of"))


def test_every_aws_price_carries_its_date_and_region() -> None:
    for name, entry in _raw("instances").items():
        inst = catalog.instance(name)
        if "." not in name:  # owned hardware, priced at 0
            assert inst.on_demand_usd_per_hour == 0.0, name
            continue
        assert inst.on_demand_usd_per_hour > 0, name
        assert _is_past_date(entry.get("price_as_of")) and inst.price_region == "us-east-1", name


def test_peaks_are_dense_never_above_half_the_vendor_sparse_figure() -> None:
    keys = {"tf32": "tf32", "fp16_tensor": "amp_fp16", "bf16_tensor": "amp_bf16"}
    for name, entry in _raw("gpus").items():
        gpu = catalog.gpu(name)
        for key, sparse in (entry.get("vendor_sparse") or {}).items():
            assert gpu.peak_flops[keys[key]] <= sparse * 1e12 / 2 * (1 + 1e-9), f"{name} {key}"
        assert all(v > 0 for v in gpu.peak_flops.values()), name


def test_memory_is_usable_not_nominal() -> None:
    for name, entry in _raw("gpus").items():
        # binary units only: NVIDIA's "GB" of GPU memory are GiB ("141 GB" read as decimal lost 6 %)
        assert re.fullmatch(r"[\d.]+ (MiB|GiB)", entry["memory"]), name
        gpu = catalog.gpu(name)
        assert 0.85 * gpu.memory_nominal_bytes <= gpu.memory_bytes <= gpu.memory_nominal_bytes, name
        if entry.get("ecc_capacity_cost"):  # GDDR6 with ECC on gives up 1/16 of its capacity
            assert gpu.memory_bytes <= gpu.memory_nominal_bytes * 15 / 16, name


def test_links_are_per_direction_and_effective_never_exceeds_line_rate() -> None:
    for name in catalog.names("links"):
        link = catalog.link(name)
        assert 0 < link.effective_bytes_per_s <= link.line_bytes_per_s, name
        if name.startswith("nvlink"):  # links x 25 GB/s per direction, never the bidirectional sum
            assert (link.line_bytes_per_s / 25e9).is_integer(), name


def test_node_count_tables_are_ordered_bounded_and_held() -> None:
    for name in catalog.names("links"):
        link = catalog.link(name)
        if not link.busbw_by_nodes:
            assert link.effective_bytes_per_s_at(2) == link.effective_bytes_per_s_at(64) == link.effective_bytes_per_s
            continue
        counts = [n for n, _ in link.busbw_by_nodes]
        assert counts == sorted(counts) and counts[0] >= 2 and link.measured_gpus_per_node > 0, name
        assert link.effective_bytes_per_s == link.busbw_by_nodes[-1][1], name
        assert link.effective_bytes_per_s_at(counts[-1] * 4) == link.busbw_by_nodes[-1][1], name
        for nodes, busbw in link.busbw_by_nodes:  # a NIC carries >= 2(n-1)/n * S per node
            p = nodes * link.measured_gpus_per_node
            assert busbw <= link.line_bytes_per_s * nodes * (p - 1) / ((nodes - 1) * p), (name, nodes)
            hier = link.effective_bytes_per_s_at(nodes, "hierarchical")
            assert hier <= link.line_bytes_per_s, (name, nodes)


def test_instance_network_and_ebs_baselines_are_within_their_bursts() -> None:
    for name in catalog.names("instances"):
        inst = catalog.instance(name)
        assert inst.network_burst_bytes_per_s == catalog.link(inst.network).line_bytes_per_s, name
        if inst.network_baseline_bytes_per_s is not None:
            assert 0 < inst.network_baseline_bytes_per_s < inst.network_burst_bytes_per_s, name
        assert 0 < inst.network_sustained_fraction <= 1, name
        if "." in name:  # every AWS instance has its own EBS bandwidth
            assert inst.ebs_baseline_bytes_per_s and inst.ebs_burst_bytes_per_s, name
            assert inst.ebs_baseline_bytes_per_s <= inst.ebs_burst_bytes_per_s, name
        catalog.link(inst.host_link)


def test_storage_bandwidths_are_positive_per_direction_figures() -> None:
    for name in catalog.names("storage"):
        store = catalog.storage(name)
        assert 0 < store.write_bw_bytes_per_s <= 100e9 and 0 < store.read_bw_bytes_per_s <= 100e9, name


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
