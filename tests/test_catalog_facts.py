"""Catalog facts corrected in issue #18, each pinned to its cited figure (the source is in the docstring).

A test here fails when a catalog value drifts from the public figure it cites. The tolerances are
the rounding of the cited figure, not a margin for a different value.
"""

from __future__ import annotations

import pytest
from conftest import ROOT

from hsisim import catalog
from hsisim.analytic import collectives, compute
from hsisim.profile import load_profile
from hsisim.resolve import resolve_job
from hsisim.scenario import load_scenario
from hsisim.sim.spec import Job

MiB, GiB = 2**20, 2**30
TF = 1e12


# --- GPUs ------------------------------------------------------------------------------------------

def test_a10g_tensor_peaks_are_the_measured_half_rate() -> None:
    """github.com/zzc0721/torch-performance-test-data issue #126 (2026-01-20), torch GEMMs on an A10G:
    TF32 34.71, FP16 69.47, BF16 69.47 TFLOP/s. A peak is never below a measured GEMM, and the
    half-rate peak is within 2 % above it; the A10 datasheet's 62.5 / 125 / 125 would be 1.8x."""
    gpu = catalog.gpu("a10g")
    for precision, measured in (("tf32", 34.71), ("amp_fp16", 69.47), ("amp_bf16", 69.47)):
        assert measured * TF <= gpu.peak_flops[precision] <= 1.02 * measured * TF, precision


def test_a10g_and_rtx3090_are_about_equal_by_roofline() -> None:
    """GA102 whitepaper v2.1 Table 9 (RTX 3090 FP16 with FP32 accumulate 71 TFLOP/s) against the A10G's
    measured 69.5: a profile moved from a 3090 to an A10G by roofline ratio must stay near 1 (it was 0.57)."""
    src, dst = catalog.gpu("rtx3090"), catalog.gpu("a10g")
    ratio = compute.roofline_ratio(src.peak_flops["amp_fp16"], src.mem_bw_bytes_per_s,
                                   dst.peak_flops["amp_fp16"], dst.mem_bw_bytes_per_s, True)
    assert 0.95 <= ratio <= 1.05


@pytest.mark.parametrize(("name", "fp32_ratio"), [("t4", 0.55), ("v100", 0.727), ("v100_32gb", 0.727)])
def test_bf16_without_bf16_tensor_cores_runs_at_the_measured_share_of_fp32(name: str, fp32_ratio: float) -> None:
    """zzc0721/torch-performance-test-data database.md: T4 bf16/fp32 GEMMs 2.46/4.17 and 2.27/4.43
    (0.55 together); V100S 9.85/13.55 (0.727). Turing and Volta have no BF16 tensor cores."""
    gpu = catalog.gpu(name)
    assert gpu.peak_flops["amp_bf16"] == pytest.approx(fp32_ratio * gpu.peak_flops["fp32"], rel=0.02)


@pytest.mark.parametrize(("name", "mib"), [
    ("t4", 15102),        # torch total_memory=15102MB (Colab logs); nvidia-smi 15360 MiB
    ("a10g", 22587),      # torch total_memory=22587MB (g5 log); nvidia-smi 23028 MiB
    ("l4", 23034),        # nvidia-smi memory.total (no torch printout found)
    ("v100", 16160),      # torch total_memory=16160MB (YOLOv5 logs)
    ("v100_32gb", 32510),  # torch total_memory=32510MB (V100-PCIE-32GB)
    ("a100_40gb", 40536),  # CUDA total_memory=40536MB (PaddlePaddle docs)
    ("a100_80gb", 81920),  # one torch printout, not independently confirmed
    ("h100", 81082),      # torch total_memory=81082MB
    ("h200", 143156),     # torch total_memory=143156MB; nvidia-smi 143771 MiB
    ("rtx3090", 24268),   # torch total_memory=24268MB (HF transformers docs)
])
def test_memory_is_the_usable_figure_cuda_reports(name: str, mib: int) -> None:
    """Public torch.cuda.get_device_properties printouts (total_memory in MiB), ECC on for data-center
    parts; sources per row in gpus.yaml."""
    assert catalog.gpu(name).memory_bytes == mib * MiB


def test_h200_141_gb_is_binary() -> None:
    """NVIDIA's "141 GB" H200: nvidia-smi 143771 MiB = 140.4 GiB, CUDA 143156 MiB = 139.8 GiB. Parsed as
    decimal gigabytes it was 131.3 GiB, 6 % short."""
    gpu = catalog.gpu("h200")
    assert 139.5 * GiB <= gpu.memory_bytes <= 140.4 * GiB
    assert gpu.memory_nominal_bytes == 141 * GiB


def test_gddr6_parts_lose_a_sixteenth_to_ecc() -> None:
    """T4 / A10G / L4 with ECC on: CUDA and nvidia-smi report 6-8 % below the nominal 16 / 24 GiB."""
    for name in ("t4", "a10g", "l4"):
        gpu = catalog.gpu(name)
        assert 0.90 <= gpu.memory_bytes / gpu.memory_nominal_bytes <= 1 - 1 / 16, name


def test_hopper_hosts_run_pcie_gen4_and_p5en_gen5() -> None:
    """AWS EC2 Instance Types guide (2024): p5.48xlarge runs on AMD EPYC 7R13 (PCIe 4.0); p5en's
    Sapphire Rapids host runs PCIe Gen5 (third-party guides quoting AWS)."""
    assert catalog.gpu("h100").pcie == catalog.gpu("h200").pcie == "pcie4"
    assert catalog.instance("p5.48xlarge").host_link == "pcie4"
    assert catalog.instance("p5en.48xlarge").host_link == "pcie5"


# --- prices ----------------------------------------------------------------------------------------

@pytest.mark.parametrize(("name", "usd", "before"), [
    ("p5.48xlarge", 55.04, 98.32),
    ("p4d.24xlarge", 21.957642, 32.7726),
    ("p4de.24xlarge", 27.44705, 40.9657),
])
def test_p4_p5_prices_after_the_june_2025_cut(name: str, usd: float, before: float) -> None:
    """instances.vantage.sh data (AWS Price List) in github.com/tsaol/aws-gpu data/*_instances.js,
    snapshot 2026-08-26, us-east-1 Linux on-demand: the prices after AWS's June 2025 reduction."""
    inst = catalog.instance(name)
    assert inst.on_demand_usd_per_hour == pytest.approx(usd, abs=5e-5)
    assert inst.on_demand_usd_per_hour < 0.7 * before
    assert (inst.price_region, inst.price_as_of) == ("us-east-1", "2026-08-26")


def test_p5en_is_the_on_demand_h200_and_p5e_is_not_listed() -> None:
    """dstack PR #4110 (2026-08-06) and tsaol/aws-gpu data/p5en_instances.js (2025-12-21): p5en.48xlarge
    $63.296 on demand in us-east-1; data/p5e_instances.js lists no on-demand price for p5e.48xlarge
    (Capacity Blocks only)."""
    inst = catalog.instance("p5en.48xlarge")
    assert (inst.gpu, inst.gpus, inst.on_demand_usd_per_hour) == ("h200", 8, 63.296)
    assert "p5e.48xlarge" not in catalog.names("instances")


@pytest.mark.parametrize(("name", "usd"), [
    ("g4dn.xlarge", 0.526), ("g4dn.12xlarge", 3.912), ("g4dn.metal", 7.824), ("g5.xlarge", 1.006),
    ("g5.2xlarge", 1.212), ("g5.12xlarge", 5.672), ("g5.48xlarge", 16.288), ("g6.xlarge", 0.8048),
    ("g6.12xlarge", 4.6016), ("p3.2xlarge", 3.06), ("p3.8xlarge", 12.24), ("p3.16xlarge", 24.48),
    ("p3dn.24xlarge", 31.212),
])
def test_other_prices_match_the_aws_list(name: str, usd: float) -> None:
    """instances.vantage.sh data in github.com/tsaol/aws-gpu, snapshot 2026-08-26, us-east-1 Linux."""
    assert catalog.instance(name).on_demand_usd_per_hour == pytest.approx(usd, abs=5e-5)


# --- storage ---------------------------------------------------------------------------------------

def test_fsx_scratch2_writes_at_its_disk_throughput() -> None:
    """AWS FSx for Lustre User Guide, SSD performance table, SCRATCH_2: disk 100 MBps/TiB write, 200 read
    (network 200 baseline, burst for reads only); 1200 GiB = 1.17 TiB. It was 1 GB/s write, 8.5x faster."""
    tib = 1200 / 1024
    fsx = catalog.storage("fsx")
    assert fsx.write_bw_bytes_per_s == pytest.approx(100e6 * tib, rel=1e-3)
    assert fsx.read_bw_bytes_per_s == pytest.approx(200e6 * tib, rel=1e-3)


@pytest.mark.parametrize(("name", "baseline_mbps", "burst_mbps"), [
    ("p3.2xlarge", 1750, 1750), ("g5.xlarge", 700, 3500), ("g5.2xlarge", 850, 3500), ("g4dn.xlarge", 950, 3500),
    ("g6.xlarge", 1000, 5000), ("g5.12xlarge", 16000, 16000), ("p4d.24xlarge", 19000, 19000),
    ("p5.48xlarge", 80000, 80000), ("p5en.48xlarge", 100000, 100000),
])
def test_ebs_bandwidth_is_the_instance_s_own(name: str, baseline_mbps: int, burst_mbps: int) -> None:
    """AWS EC2 Instance Types guide (2024), accelerated computing 'Amazon EBS specifications', Baseline /
    Maximum bandwidth (Mbps); p5en: instances.vantage.sh 'ebsBandwidth: 100 Gbps'."""
    inst = catalog.instance(name)
    assert inst.ebs_baseline_bytes_per_s == baseline_mbps * 1e6 / 8
    assert inst.ebs_burst_bytes_per_s == burst_mbps * 1e6 / 8


# --- networks --------------------------------------------------------------------------------------

@pytest.mark.parametrize(("name", "fraction"), [
    ("g4dn.xlarge", 5.0 / 25.0), ("g5.xlarge", 2.5 / 10.0), ("g5.2xlarge", 5.0 / 10.0), ("g6.xlarge", 2.5 / 10.0),
    ("g5.12xlarge", 1.0), ("p4d.24xlarge", 1.0), ("p3.2xlarge", 1.0),
])
def test_up_to_sizes_sustain_their_baseline(name: str, fraction: float) -> None:
    """AWS EC2 Instance Types guide (2024), accelerated computing 'Network specifications', Baseline /
    Burst bandwidth (Gbps). p3.2xlarge is 'Up to 10 Gigabit' with no published baseline (held at burst)."""
    assert catalog.instance(name).network_sustained_fraction == pytest.approx(fraction)


@pytest.mark.parametrize(("nodes", "gb_s"), [(2, 57.2), (3, 31.8), (4, 29.6), (8, 29.6), (64, 29.6)])
def test_efa400_bus_bandwidth_by_node_count(nodes: int, gb_s: float) -> None:
    """NVIDIA/nccl issue #527 (2022-07-25): all_reduce_perf 1 GiB busbw on 2/3/4 p4d.24xlarge 57.2, 31.8,
    29.6 GB/s; beyond 4 nodes the last measurement is held. One figure (40 GB/s) fitted none of them."""
    assert catalog.link("efa400").effective_bytes_per_s_at(nodes) == pytest.approx(gb_s * 1e9)


@pytest.mark.parametrize(("nodes", "us"), [(2, 35198.0), (3, 64827.0), (4, 70207.0)])
def test_efa400_ring_model_reproduces_the_measured_all_reduce(nodes: int, us: float) -> None:
    """NVIDIA/nccl issue #527: in-place time of a 1 GiB all-reduce on 2/3/4 p4d.24xlarge (8 GPUs each).
    The ring formula 2(p-1)/p * S/B with B = the catalog's busbw gives the measured time; the
    hierarchical model's inter-node ring, with its per-NIC rate, takes the same time."""
    inst, size = catalog.instance("p4d.24xlarge"), 2**30
    intra, net = catalog.link(inst.intra), catalog.link(inst.network)
    topo = collectives.Topology(nodes, 8, intra.latency_s, intra.effective_bytes_per_s, net.latency_s,
                                net.effective_bytes_per_s_at(nodes, "ring"))
    assert collectives.allreduce(size, topo, "ring") == pytest.approx(us * 1e-6, rel=0.03)
    nic = net.effective_bytes_per_s_at(nodes, "hierarchical")
    assert collectives.ring_allreduce(size / 8, nodes, 0.0, nic / 8) == pytest.approx(us * 1e-6, rel=0.01)


def test_efa400_busbw_respects_the_nic_line_rate() -> None:
    """A hierarchical all-reduce sends at least 2(n-1)/n * S per node over a 400 Gbit/s NIC, so
    busbw <= line * n(p-1)/((n-1)p): the 2-node tree figure may exceed the line rate, never this bound."""
    link = catalog.link("efa400")
    for nodes, busbw in link.busbw_by_nodes:
        p = nodes * link.measured_gpus_per_node
        assert busbw <= link.line_bytes_per_s * nodes * (p - 1) / ((nodes - 1) * p)


@pytest.mark.parametrize(("nodes", "gbit_s"), [(2, 80.0), (5, 70.0), (8, 60.0), (32, 50.0), (128, 50.0)])
def test_efa100_bus_bandwidth_by_node_count(nodes: int, gbit_s: float) -> None:
    """NVIDIA/nccl issue #235, S. Jeaugey 2019-07-16 (p3dn, EFA): ~80 Gb/s on 2 nodes, 50-60 Gb/s on 8 to
    32 nodes (placed at 8 and 32), linear between, held beyond. It was 80 Gbit/s at every count."""
    assert catalog.link("efa100").effective_bytes_per_s_at(nodes) == pytest.approx(gbit_s * 1e9 / 8)


def test_nvlink_line_rates_are_per_direction() -> None:
    """NVIDIA V100 / A100 / H100 whitepapers: 6 / 12 / 18 links of 25 GB/s per direction (the 300 / 600 /
    900 GB/s of the datasheets are bidirectional sums)."""
    for name, links in (("nvlink2", 6), ("nvlink3", 12), ("nvlink4", 18)):
        assert catalog.link(name).line_bytes_per_s == links * 25e9, name


def test_nvlink3_bus_bandwidth_is_the_one_node_p4d_measurement() -> None:
    """NVIDIA/nccl issue #527: one p4d.24xlarge, 1 GiB all-reduce, busbw 230.77 GB/s."""
    assert catalog.link("nvlink3").effective_bytes_per_s == pytest.approx(230.77e9, rel=0.01)


# --- the figures wired into a resolved job ------------------------------------------------------------

def _job(*overrides: str) -> Job:
    return resolve_job(load_scenario(ROOT / "scenarios" / "spot_8x.yaml", list(overrides)))


def test_a_job_on_p4d_pays_the_measured_busbw_of_its_node_count() -> None:
    """NVIDIA/nccl issue #527: busbw 57.2 GB/s on 2 p4d, 31.8 on 3: the per-step all-reduce of the same
    gradients takes ~1.8x longer on 3 nodes than on 2."""
    common = ("cluster.instance=p4d.24xlarge", "training.micro_batch=16", "training.global_batch=3072")
    two, three = _job(*common, "cluster.nodes=2"), _job(*common, "cluster.nodes=3")
    assert 1.6 <= three.comm_total_s / two.comm_total_s <= 2.0


def test_an_up_to_size_trains_at_its_network_baseline() -> None:
    """AWS network specifications: g5.xlarge 2.5 / 10 Gbps, g5.2xlarge 5.0 / 10 Gbps, both on the same
    10 GbE link: a multi-node all-reduce takes about twice as long on the g5.xlarge."""
    common = ("cluster.nodes=4", "loader.num_workers=2")
    small, large = _job("cluster.instance=g5.xlarge", *common), _job("cluster.instance=g5.2xlarge", *common)
    assert 1.8 <= small.comm_total_s / large.comm_total_s <= 2.05


def test_ebs_checkpoints_run_at_the_instance_s_ebs_baseline() -> None:
    """AWS EBS specifications: p3.2xlarge 1750 Mbps (218.75 MB/s): a 500 MB/s gp3 volume writes no faster."""
    job = _job("cluster.instance=p3.2xlarge", "checkpoint.storage=ebs", "loader.num_workers=2")
    ebs = catalog.storage("ebs")
    assert job.ckpt_write_s == pytest.approx(ebs.latency_s + job.ckpt_bytes / 218.75e6)
    assert job.ckpt_restore_s == pytest.approx(ebs.latency_s + job.ckpt_bytes / 218.75e6)


def test_a_run_says_when_compute_rests_on_catalog_figures() -> None:
    """No calibration of the A10G: the run names the figures and their source; a CPU run calibrated on
    the CPU does not."""
    notes = _job().notes
    assert any("catalog figures" in n and "NVIDIA A10G" in n and "69.47" not in n and "70.0 TFLOP/s" in n
               and "zzc0721" in n for n in notes)
    profile = ROOT / "calibration" / "cpu-amd-epyc-2core.json"
    assert load_profile(profile).catalog_gpu == "cpu"
    cpu = resolve_job(load_scenario(ROOT / "scenarios" / "validate" / "cpu_compute_bound.yaml",
                                [f"calibration={profile}"]))
    assert not any("catalog figures" in n for n in cpu.notes)
