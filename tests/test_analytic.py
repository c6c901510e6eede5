"""Analytic component models against the DESIGN.md oracles and closed forms."""

from __future__ import annotations

import math

import pytest

from hsisim import catalog
from hsisim.analytic import checkpoint as ckpt
from hsisim.analytic import collectives, compute, datapipe, memory


def test_eta_oracle_seed_article_10_2() -> None:
    assert compute.efficiency(0.100, 0.100 + 0.0 + 0.010) == pytest.approx(100 / 110)
    assert compute.efficiency(0.100, 0.100 + 0.080 + 0.060) == pytest.approx(100 / 240)
    assert round(100 / 110, 2) == 0.91 and round(100 / 240, 2) == 0.42


def test_200_mb_over_25_gbe_takes_64_ms() -> None:
    bw = catalog.link("eth25").line_bytes_per_s
    assert 200e6 / bw == pytest.approx(0.064)


def test_1e8_params_fp32_adam_is_1_6_gb() -> None:
    w, g, o = memory.model_states(10**8, "fp32", "adam", zero_stage=0, world=1)
    assert w + g + o == pytest.approx(1.6e9)


def test_zero_stages_shard_what_they_should() -> None:
    full = memory.model_states(10**8, "fp32", "adam", 0, 8)
    z1 = memory.model_states(10**8, "fp32", "adam", 1, 8)
    z2 = memory.model_states(10**8, "fp32", "adam", 2, 8)
    z3 = memory.model_states(10**8, "fp32", "adam", 3, 8)
    assert z1 == (full[0], full[1], full[2] / 8)
    assert z2 == (full[0], full[1] / 8, full[2] / 8)
    assert z3 == (full[0] / 8, full[1] / 8, full[2] / 8)


def test_activation_checkpointing_keeps_about_the_square_root() -> None:
    assert memory.checkpointed_activation_factor(100) == pytest.approx(0.2)
    assert memory.checkpointed_activation_factor(1) == 1.0


@pytest.mark.parametrize(("young", "daly", "m", "d"), [(120.0, 116.69, 1440, 5), (12.25, 9.14, 15, 5)])
def test_young_and_daly_examples(young: float, daly: float, m: float, d: float) -> None:
    assert ckpt.young_interval(d, m) == pytest.approx(young, abs=0.005)
    assert ckpt.daly_interval(d, m) == pytest.approx(daly, abs=0.005)


def test_daly_beyond_its_range_is_mtbf() -> None:
    assert ckpt.daly_interval(40, 15) == 15


def test_ring_allreduce_closed_form() -> None:
    p, a, s, b = 8, 5e-6, 100e6, 10e9
    assert collectives.ring_allreduce(s, p, a, b) == pytest.approx(2 * 7 * a + 2 * 7 / 8 * s / b)
    assert collectives.ring_allreduce(s, 1, a, b) == 0.0


@pytest.mark.parametrize("p", [2, 4, 8, 16])
def test_bus_bandwidth_of_the_ring_model_is_the_link_bandwidth(p: int) -> None:
    # nccl-tests: busbw = algbw × 2(p−1)/p; for a ring without latency busbw equals the link bandwidth
    b = 20e9
    for s in (1e6, 1e8, 1e9):
        t = collectives.ring_allreduce(s, p, 0.0, b)
        assert collectives.bus_bandwidth(s, t, p) == pytest.approx(b)
    # with latency, busbw approaches B from below as messages grow
    small = collectives.bus_bandwidth(1e5, collectives.ring_allreduce(1e5, p, 1e-5, b), p)
    large = collectives.bus_bandwidth(1e9, collectives.ring_allreduce(1e9, p, 1e-5, b), p)
    assert small < large < b


def _topo(nodes: int, g: int) -> collectives.Topology:
    return collectives.Topology(nodes, g, 5e-6, 200e9, 50e-6, 3e9)


def test_hierarchical_beats_flat_ring_across_slow_nics() -> None:
    topo = _topo(4, 8)
    s = 100e6
    assert collectives.allreduce(s, topo, "hierarchical") < collectives.allreduce(s, topo, "ring")


def test_single_node_ignores_the_nic() -> None:
    topo = _topo(1, 8)
    assert collectives.allreduce(1e8, topo, "ring") == collectives.ring_allreduce(1e8, 8, 5e-6, 200e9)


def test_ddp_overlap_hides_comm_behind_backward() -> None:
    fast = lambda s: s / 1e12  # noqa: E731
    total, exposed = collectives.ddp_exposed(100 * 2**20, 1.0, fast)
    assert total == pytest.approx(100 * 2**20 / 1e12)
    # only the last bucket, ready at the very end of backward, is exposed
    assert exposed == pytest.approx(25 * 2**20 / 1e12)
    slow = lambda s: s / 1e6  # noqa: E731
    total, exposed = collectives.ddp_exposed(100 * 2**20, 1.0, slow)
    # comm-bound: the first bucket starts at 1/4 of backward and the rest follow back to back
    bucket = 25 * 2**20 / 1e6
    assert exposed == pytest.approx(0.25 + 4 * bucket - 1.0)


def test_ddp_exposed_is_never_more_than_total_nor_negative() -> None:
    for grad in (1e3, 3e7, 5e8):
        for bwd in (0.0, 0.01, 10.0):
            total, exposed = collectives.ddp_exposed(grad, bwd, lambda s: 1e-4 + s / 1e9)
            assert 0 <= exposed <= total + 1e-12


def test_roofline_compute_grows_linearly_with_batch() -> None:
    cost = compute.roofline_cost(fwd_flops=1e9, act_bytes=1e6, params=10**6, ops=10, peak_flops=1e14,
                                 efficiency=0.1, mem_bw_bytes_per_s=1e12, optimizer_bytes_per_param=28)
    assert cost.c_s_per_sample == pytest.approx(3e9 / 1e13)
    assert cost.time(64) - cost.time(32) == pytest.approx(32 * cost.c_s_per_sample)
    ac = compute.roofline_cost(fwd_flops=1e9, act_bytes=1e6, params=10**6, ops=10, peak_flops=1e14,
                               efficiency=0.1, mem_bw_bytes_per_s=1e12, optimizer_bytes_per_param=28,
                               activation_checkpointing=True)
    assert ac.c_s_per_sample / cost.c_s_per_sample == pytest.approx(1 + compute.RECOMPUTE_OVERHEAD)


def test_pca_in_getitem_costs_bands_times_components_per_pixel() -> None:
    cpu = catalog.cpu()
    kw = dict(patch=25, bands=200, out_bands=30, storage="in_memory", augmentation="none", cpu=cpu)
    online = datapipe.sample_cost(preprocess="getitem", pca=True, **kw)  # type: ignore[arg-type]
    no_pca = datapipe.sample_cost(preprocess="getitem", pca=False, **kw)  # type: ignore[arg-type]
    offline = datapipe.sample_cost(preprocess="offline", pca=True, **kw)  # type: ignore[arg-type]
    assert online.preprocess - no_pca.preprocess == pytest.approx(2 * 625 * 200 * 30 / cpu.pca_flops)
    assert offline.preprocess == 0.0 and offline.total < online.total


def test_storage_kinds_order_as_expected() -> None:
    cpu = catalog.cpu()
    cost = {s: datapipe.sample_cost(patch=15, bands=144, out_bands=144, preprocess="offline", pca=False, storage=s,
                                    augmentation="none", cpu=cpu, fs_latency_s=600e-6, fs_share_bw=10e6).total
            for s in ("in_memory", "memmap", "envi", "hdf5", "network_fs")}
    assert cost["in_memory"] <= cost["memmap"] < cost["envi"] < cost["hdf5"]
    assert cost["network_fs"] > cost["envi"]


def test_checkpoint_size() -> None:
    assert ckpt.checkpoint_bytes(10**6, "fp32", "adam") == 12e6
    assert ckpt.checkpoint_bytes(10**6, "bf16", "adam") == 14e6
    assert ckpt.write_seconds(1e9, 1e8, 0.01, writers=2) == pytest.approx(0.01 + 5.0)
    assert math.isclose(ckpt.write_seconds(0, 1e8, 0.03), 0.03)
